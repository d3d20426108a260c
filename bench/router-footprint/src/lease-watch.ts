/** A watch on the router echo Leases of the bench namespace, to time when a router echoes a digest. */
import https from 'node:https';
import { NS, SANDBOX } from './peers.js';

/** A Lease watch event, as far as it is read here. */
interface LeaseEvent {
  type: string;
  object: { metadata: { name: string; annotations?: Record<string, string> } };
}

/** The running watch of {@link watchLeases}. */
export interface LeaseWatch {
  /** performance.now() of the first event showing Lease `name` with `digest` loaded. */
  waitFor(name: string, digest: string, timeoutMs: number): Promise<number>;
  close(): void;
}

/**
 * A watch on the router echo Leases of the bench namespace. `waitFor(name, digest, deadline)`
 * resolves with performance.now() of the first event showing Lease `name` with `digest` among its
 * loaded digests (events that arrived before the call count too).
 */
export function watchLeases(url: string, ca: string, token: string): LeaseWatch {
  const seen = new Map<string, Array<{ t: number; digests: Record<string, unknown> }>>(); // lease name → events
  const waiters: Array<{ check(): void }> = [];
  const u = new URL(url);
  let buf = '';
  let failed: Error | undefined;
  const req = https.request(
    {
      host: u.hostname,
      port: u.port,
      method: 'GET',
      path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases?watch=true&labelSelector=${encodeURIComponent(`kars.azure.com/sandbox=${SANDBOX}`)}`,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      ca,
      agent: false,
    },
    (res) => {
      if (res.statusCode !== 200) failed = new Error(`lease watch: HTTP ${res.statusCode}`);
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        const t = performance.now();
        buf += c;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim() === '') continue;
          const ev = JSON.parse(line) as LeaseEvent;
          if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED') continue;
          const name = ev.object.metadata.name;
          let digests: Record<string, unknown> = {};
          try {
            digests = JSON.parse(ev.object.metadata.annotations?.['kars.azure.com/loaded-digests'] ?? '{}') as Record<string, unknown>;
          } catch {
            digests = {};
          }
          const list = seen.get(name) ?? [];
          list.push({ t, digests });
          seen.set(name, list);
          for (const w of [...waiters]) w.check();
        }
      });
      res.on('end', () => (failed ??= new Error('lease watch ended')));
    },
  );
  req.on('error', (e) => (failed ??= e));
  req.end();
  return {
    waitFor(name, digest, timeoutMs) {
      return new Promise((res, rej) => {
        const w = {
          check(): void {
            const hit = (seen.get(name) ?? []).find((e) => Object.values(e.digests).includes(digest));
            if (hit) {
              done();
              res(hit.t);
            } else if (failed) {
              done();
              rej(failed);
            }
          },
        };
        const timer = setTimeout(() => {
          done();
          rej(new Error(`no echo of ${digest} on Lease ${name} within ${timeoutMs / 1000} s`));
        }, timeoutMs);
        const done = (): void => {
          clearTimeout(timer);
          const k = waiters.indexOf(w);
          if (k >= 0) waiters.splice(k, 1);
        };
        waiters.push(w);
        w.check();
      });
    },
    close: () => req.destroy(),
  };
}
