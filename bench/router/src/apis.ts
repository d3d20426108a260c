/**
 * The inference APIs the benchmark sends (chat completions, Responses, Anthropic Messages): the
 * request bodies, the auth headers and how to tell an error frame in a stream.
 */

export const SYSTEM_PROMPT = 'You are a concise assistant working inside a kars sandbox.';
export const USER_PROMPT = 'Summarise the last build log in one sentence.';

/** The chat completions body of the benchmark, with `max_tokens` set to `maxTokens`. */
export const chatBody = (maxTokens: number): string =>
  JSON.stringify({
    model: 'gpt-4o',
    max_tokens: maxTokens,
    temperature: 0.2,
    messages: [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: USER_PROMPT },
    ],
  });

/** The name of an API in {@link APIS} (and in `BENCH_APIS`). */
export type ApiName = 'chat' | 'responses' | 'messages';

/** One inference API of {@link APIS}. */
export interface ApiSpec {
  name: ApiName;
  label: string;
  path: string;
  /** Which stub serves it. */
  upstream: 'openai' | 'anthropic';
  auth: Record<string, string>;
  /** The request body for a token limit. */
  body: (maxTokens: number) => string;
  /** Whether the text of a stream carries an error frame. */
  streamError: (text: string) => boolean;
}

/**
 * The inference APIs the latency and time-to-first-byte phases measure (`BENCH_APIS`), each with
 * the same prompt: its path, the body for a token limit, the auth headers a client sends, which
 * stub serves it, and how to tell an error frame in its stream (Responses objects carry
 * `"error":null`, so the chat test of `"error"` would misfire there).
 */
export const APIS: Record<ApiName, ApiSpec> = {
  chat: {
    name: 'chat',
    label: 'chat completions',
    path: '/v1/chat/completions',
    upstream: 'openai',
    auth: { Authorization: 'Bearer sk-kars-bench' },
    body: chatBody,
    streamError: (text) => text.includes('"error"'),
  },
  responses: {
    name: 'responses',
    label: 'Responses',
    path: '/v1/responses',
    upstream: 'openai',
    auth: { Authorization: 'Bearer sk-kars-bench' },
    body: (maxTokens) =>
      JSON.stringify({
        model: 'gpt-4o',
        max_output_tokens: maxTokens,
        temperature: 0.2,
        instructions: SYSTEM_PROMPT,
        input: [{ role: 'user', content: USER_PROMPT }],
      }),
    streamError: (text) => /^event: (error|response\.failed)$/m.test(text),
  },
  messages: {
    name: 'messages',
    label: 'Anthropic Messages',
    path: '/v1/messages',
    upstream: 'anthropic',
    auth: { 'x-api-key': 'sk-ant-kars-bench', 'anthropic-version': '2023-06-01' },
    body: (maxTokens) =>
      JSON.stringify({
        model: 'claude-sonnet-4-5',
        max_tokens: maxTokens,
        temperature: 0.2,
        system: SYSTEM_PROMPT,
        messages: [{ role: 'user', content: USER_PROMPT }],
      }),
    streamError: (text) => /^event: error$/m.test(text),
  },
};

/** Whether `name` is one of {@link APIS}. */
export const isApiName = (name: string): name is ApiName => Object.hasOwn(APIS, name);
