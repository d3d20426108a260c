/**
 * What the peers run and are sent: the router's node options, the bare node:http server (and the
 * stub answer it returns), and the chat request of the load generator.
 */
import { join } from 'node:path';
import { ROOT } from '../../lib/dist/index.js';

/**
 * The router benchmark (bench/router), run for its `--stub` (the OpenAI stub) and `--loadgen` (the
 * open-loop load generator) modes.
 */
export const ROUTER_BENCH = join(ROOT, 'bench/router/dist/main.js');
/** The namespace of the sandbox, its policy and its echo Leases. */
export const NS = 'bench';
/** The sandbox the routers serve. */
export const SANDBOX = 'sb';
/** The InferencePolicy loaded. */
export const POLICY = 'footprint';

/**
 * The node options the router's container runs with (the Helm chart, deploy/examples/sandbox-router,
 * `kars up`): `@kars/router`'s ROUTER_NODE_OPTIONS, ADR 0059. BENCH_ROUTER_NODE_OPTIONS tries others.
 */
export { ROUTER_NODE_OPTIONS } from '@kars/router/process-options';

/** The stub's answer to the chat body below, for the bare server (byte for byte what the router relays). */
const ANSWER =
  '{"id":"chatcmpl-stub-1","object":"chat.completion","created":1796008007,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the kars OpenAI stub."},"finish_reason":"stop","content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}],"usage":{"prompt_tokens":15,"completion_tokens":15,"total_tokens":30},"system_fingerprint":null,"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}]}';

/** The bare peer: node:http only, reads the body and answers ANSWER. */
export const BARE_SERVER = `
import http from 'node:http';
const answer = Buffer.from(${JSON.stringify(ANSWER)});
const server = http.createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer));
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write('listening: http://127.0.0.1:' + server.address().port + '\\n'));
process.once('SIGTERM', () => { server.close(() => process.exit(0)); server.closeAllConnections(); });
`;

const CHAT_BODY = JSON.stringify({
  model: 'gpt-4o',
  max_tokens: 256,
  temperature: 0.2,
  messages: [
    { role: 'system', content: 'You are a concise assistant working inside a kars sandbox.' },
    { role: 'user', content: 'Summarise the last build log in one sentence.' },
  ],
});

/** The raw HTTP/1.1 request the load generator sends (what bench/router sends too). */
export function chatRequest(url: string): Buffer {
  const u = new URL(url);
  const payload = Buffer.from(CHAT_BODY);
  const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-kars-bench\r\nContent-Length: ${payload.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), payload]);
}
