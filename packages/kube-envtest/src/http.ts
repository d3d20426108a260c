import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';

/** A finished HTTP exchange with the control plane. */
export interface KubeResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** How {@link kubeRequest} authenticates and what it sends. */
export interface KubeRequestOptions {
  method?: string;
  /** A JSON body (serialised here) or a string sent as is. */
  body?: unknown;
  contentType?: string;
  /** The CA to trust (PEM); required for https. */
  ca?: string;
  /** A client certificate and key (PEM). */
  cert?: string;
  key?: string;
  /** A bearer token (instead of, or beside, a client certificate). */
  token?: string;
  timeoutMs?: number;
}

/**
 * One request to `url` (https with the given CA and credential, or plain http for etcd), resolving
 * with the status and the whole body whatever the status; rejects only when no response came.
 */
export function kubeRequest(url: string, opts: KubeRequestOptions = {}): Promise<KubeResponse> {
  const u = new URL(url);
  const body = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = opts.contentType ?? 'application/json';
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
  return new Promise((resolve, reject) => {
    const common = { method: opts.method ?? 'GET', headers, timeout: opts.timeoutMs ?? 30_000 };
    const req =
      u.protocol === 'https:'
        ? httpsRequest(u, {
            ...common,
            ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
            ...(opts.cert !== undefined ? { cert: opts.cert } : {}),
            ...(opts.key !== undefined ? { key: opts.key } : {}),
          })
        : httpRequest(u, common);
    req.on('timeout', () => req.destroy(new Error(`${common.method} ${url}: no response within ${common.timeout} ms`)));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(body);
  });
}
