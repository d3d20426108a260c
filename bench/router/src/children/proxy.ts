/**
 * Child: a plain node:http pass-through proxy (`main.js --proxy <openai stub> [<anthropic stub>]`),
 * the baseline for "what one Node HTTP hop costs".
 */
import http from 'node:http';

/** Hop-by-hop headers a proxy must not forward (RFC 9110 §7.6.1). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** Start the proxy on a free port, print `listening: <url>`, stop on SIGTERM / SIGINT. */
export async function proxyMain(upstreamUrl: string, anthropicUrl: string | undefined): Promise<void> {
  const openaiUp = new URL(upstreamUrl);
  const anthropicUp = anthropicUrl ? new URL(anthropicUrl) : undefined;
  // The same agent settings as the router's inference handler.
  const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const first = chunks[0];
      const body = chunks.length === 1 && first !== undefined ? first : Buffer.concat(chunks);
      // The Anthropic routes go to the Anthropic stub, everything else to the OpenAI stub.
      const up = anthropicUp && req.url?.startsWith('/v1/messages') ? anthropicUp : openaiUp;
      const headers: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
      headers.host = up.host;
      headers['content-length'] = body.length;
      const r = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers, agent }, (ur) => {
        const h: http.OutgoingHttpHeaders = {};
        for (const [k, v] of Object.entries(ur.headers)) if (!HOP.has(k)) h[k] = v;
        res.writeHead(ur.statusCode ?? 502, h);
        ur.pipe(res);
      });
      r.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"bench proxy: upstream failed","type":"proxy_error"}}');
      });
      r.end(body);
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = addr !== null && typeof addr === 'object' ? addr.port : NaN;
  process.stdout.write(`listening: http://127.0.0.1:${port}\n`);
  const stop = (): void => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
