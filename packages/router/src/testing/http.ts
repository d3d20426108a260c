/** HTTP helpers for router tests: one JSON POST that keeps the raw answer, an OpenAI chat request body, and a CONNECT through the egress proxy. */
import net from 'node:net';

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

/** The status the egress proxy at `proxy` answers a `CONNECT target` with (the tunnel, if any, is closed). */
export function connectStatus(proxy: string, target: string): Promise<number> {
  const u = new URL(proxy);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    let buf = '';
    s.on('error', reject);
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      if (buf.includes('\r\n\r\n')) {
        s.destroy();
        resolve(Number(buf.slice(9, 12)));
      }
    });
  });
}
