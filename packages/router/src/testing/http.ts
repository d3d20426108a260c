/** HTTP helpers for router tests: one JSON POST that keeps the raw answer, and an OpenAI chat request body. */

/** An answer: status, headers, the raw text, and the text parsed as JSON (undefined when it is not JSON). */
export interface JsonReply {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** POST `body` to `url`: a string is sent as is (to test malformed bodies), anything else as JSON. */
export async function postJson(url: string | URL, body: unknown, headers: Record<string, string> = {}): Promise<JsonReply> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** POST a chat completion to the router (or upstream) at `base`. */
export function postChat(base: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonReply> {
  return postJson(`${base}/v1/chat/completions`, body, headers);
}

/** A chat completion request for gpt-4o with one user message `content`, plus `extra` fields. */
export function chatBody(content = 'hi', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-4o', messages: [{ role: 'user', content }], ...extra };
}
