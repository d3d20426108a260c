import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

/** A request from either protocol (HTTP/1.1 or HTTP/2 compatibility API). */
export type Req = IncomingMessage | Http2ServerRequest;
/** A response on either protocol. */
export type Res = ServerResponse | Http2ServerResponse;

/** Send a JSON body with a status code. */
export function sendJson(res: Res, code: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(code, {
    'content-type': 'application/json',
    'cache-control': 'no-cache, private',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}
