import type { IncomingMessage, ServerResponse } from 'node:http';
import { stringify as yamlStringify } from 'yaml';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

/** A request from either protocol (HTTP/1.1 or HTTP/2 compatibility API). */
export type Req = IncomingMessage | Http2ServerRequest;
/** A response on either protocol. */
export type Res = ServerResponse | Http2ServerResponse;

/** Send a JSON body with a status code. */
/** Responses whose client asked for YAML first (`Accept: application/yaml`): sendJson encodes them as YAML. */
const yamlAnswers = new WeakSet<Res>();

/** Answer this response in YAML, as kube-apiserver does for a client whose Accept names application/yaml first. */
export function answerInYaml(res: Res): void {
  yamlAnswers.add(res);
}

export function sendJson(res: Res, code: number, body: unknown, headers: Record<string, string> = {}): void {
  let text = typeof body === 'string' ? body : JSON.stringify(body);
  let contentType = 'application/json';
  if (yamlAnswers.has(res)) {
    // sigs.k8s.io/yaml's JSONToYAML: keys sorted, sequences not indented under their key.
    text = yamlStringify(JSON.parse(text), { sortMapEntries: true, indentSeq: false, lineWidth: 0 });
    contentType = 'application/yaml';
  }
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(code, {
    'content-type': contentType,
    'cache-control': 'no-cache, private',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}
