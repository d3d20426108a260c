import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiServer } from '../server.js';
import type { ApiServerOptions } from '../server.js';
import { findKubectl as findKubectlAmong, until } from '@kars/kube-core/testing';

/** A response from {@link TestClient.request}. */
export interface TestResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body parsed as JSON (undefined when it is not JSON). */
  body: any;
}

/**
 * A plain HTTPS/1.1 client for tests: trusts the server's CA, sends its bearer token,
 * and returns status, headers and body. Each call opens its own connection unless `agent` is kept.
 */
export class TestClient {
  readonly agent: https.Agent;

  constructor(
    readonly url: string,
    readonly ca: string,
    readonly token: string | undefined,
  ) {
    this.agent = new https.Agent({ ca, keepAlive: true, maxSockets: 64 });
  }

  request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<TestResponse> {
    const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const h: Record<string, string> = { accept: 'application/json', ...headers };
    if (this.token) h['authorization'] = `Bearer ${this.token}`;
    if (payload !== undefined) {
      h['content-type'] ??= 'application/json';
      h['content-length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = https.request(new URL(path, this.url), { method, headers: h, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: parsed });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  get(path: string): Promise<TestResponse> {
    return this.request('GET', path);
  }
  post(path: string, body: unknown): Promise<TestResponse> {
    return this.request('POST', path, body);
  }
  put(path: string, body: unknown): Promise<TestResponse> {
    return this.request('PUT', path, body);
  }
  patch(path: string, body: unknown, type: 'merge' | 'json' | 'strategic' | 'apply', query = ''): Promise<TestResponse> {
    const ct = {
      merge: 'application/merge-patch+json',
      json: 'application/json-patch+json',
      strategic: 'application/strategic-merge-patch+json',
      apply: 'application/apply-patch+yaml',
    }[type];
    return this.request('PATCH', path + query, body, { 'content-type': ct });
  }
  delete(path: string, body?: unknown): Promise<TestResponse> {
    return this.request('DELETE', path, body);
  }

  /**
   * Open a watch and collect its events. `events` fills as lines arrive; `next(pred)` waits for
   * the first event (after those already consumed) that satisfies `pred`.
   */
  watch(path: string): Promise<WatchHandle> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'application/json' };
      if (this.token) headers['authorization'] = `Bearer ${this.token}`;
      const req = https.request(new URL(path, this.url), { method: 'GET', headers, agent: new https.Agent({ ca: this.ca }) }, (res) => {
        const handle = new WatchHandle(res.statusCode ?? 0, () => req.destroy());
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          buf += c;
          let i: number;
          while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            if (line.trim() !== '') handle.push(JSON.parse(line));
          }
        });
        res.on('end', () => handle.finish());
        res.on('error', () => handle.finish());
        resolve(handle);
      });
      req.on('error', reject);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** A watch in progress, for tests. */
export class WatchHandle {
  readonly events: any[] = [];
  ended = false;
  private cursor = 0;
  private waiters: Array<() => void> = [];

  constructor(
    readonly status: number,
    readonly stop: () => void,
  ) {}

  push(e: unknown): void {
    this.events.push(e);
    this.wake();
  }

  finish(): void {
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Wait for the next event matching `pred` (default: any), failing after `timeoutMs`. */
  async next(pred: (e: any) => boolean = () => true, timeoutMs = 5000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.cursor < this.events.length) {
        const e = this.events[this.cursor++];
        if (pred(e)) return e;
      }
      if (this.ended) throw new Error(`watch ended before a matching event; saw ${JSON.stringify(this.events.map((x) => x.type))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for a watch event; saw ${JSON.stringify(this.events.map((x) => x.type))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Wait for the stream to end. */
  async closed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error('watch did not end in time');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

/** A running in-process server in a fresh temporary data dir, and a client for it. */
export interface TestServer {
  server: ApiServer;
  client: TestClient;
  dataDir: string;
  /** Stop the server, remove the data dir. */
  close(): Promise<void>;
}

/** Start `kars apiserver` in-process on a free port with a temporary data dir. */
export async function startTestServer(opts: Partial<ApiServerOptions> = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'kars-test-'));
  const server = await ApiServer.start({ listen: '127.0.0.1:0', ...opts, dataDir });
  const client = new TestClient(server.url, server.caCert, server.token);
  return {
    server,
    client,
    dataDir,
    close: async () => {
      client.close();
      await server.stop();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Create CRDs through the API; throws unless each is created (201). Their resources are served at once. */
export async function createCrds(client: TestClient, ...crds: unknown[]): Promise<void> {
  for (const crd of crds) {
    const r = await client.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    if (r.status !== 201) throw new Error(`creating a CRD answered ${r.status}: ${r.text}`);
  }
}

/**
 * The texts of a response's `Warning: 299 - "<text>"` headers (what kubectl prints), unquoted: the
 * server escapes `"` and `\` with a backslash and writes anything outside printable ASCII as `\uXXXX`.
 */
export function warningTexts(header: string | string[] | undefined): string[] {
  const text = Array.isArray(header) ? header.join(', ') : (header ?? '');
  return [...text.matchAll(/299 - "((?:[^"\\]|\\.)*)"/g)].map((m) =>
    (m[1] ?? '').replace(/\\u([0-9a-f]{4})|\\(.)/g, (_, hex: string | undefined, c: string | undefined) =>
      hex !== undefined ? String.fromCharCode(parseInt(hex, 16)) : (c ?? ''),
    ),
  );
}

/** A small namespaced CRD with a status subresource, printer columns, a default and a CEL rule. */
export function widgetCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', shortNames: ['wd'] },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
            { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
          ],
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: {
                  type: 'object',
                  'x-kubernetes-validations': [{ rule: 'self.size <= self.max', message: 'size must not exceed max' }],
                  properties: {
                    size: { type: 'integer', minimum: 0 },
                    max: { type: 'integer', default: 10 },
                    color: { type: 'string', enum: ['red', 'blue'] },
                  },
                },
                status: { type: 'object', properties: { phase: { type: 'string' } } },
              },
            },
          },
        },
      ],
    },
  };
}

/**
 * A namespaced CRD of `group` serving `kind` (plural: lower case + `s`) at v1 with `openAPIV3Schema`:
 * the least a test needs for a custom resource of its own.
 */
export function simpleCrd(group: string, kind: string, openAPIV3Schema: Record<string, unknown>): Record<string, unknown> {
  const singular = kind.toLowerCase();
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${singular}s.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: `${singular}s`, singular, kind },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema } }],
    },
  };
}

/** Poll `fn` until it returns a truthy value or `timeoutMs` passes (kube-core's `until`, with this harness's defaults). */
export function eventually<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 5000,
  everyMs = 20,
): Promise<T> {
  return until('condition', fn, { timeoutMs, everyMs });
}

/**
 * A kubectl binary for tests, or undefined (then skip). Prefers the newest of `kubectl.1.31`,
 * `kubectl.1.30`, `kubectl.1.29` beside the `kubectl` on PATH (1.32+ send protobuf for some built-in
 * creates), else that `kubectl` itself.
 */
export function findKubectl(): string | undefined {
  return findKubectlAmong(['1.31', '1.30', '1.29']);
}

export { runKubectl, type KubectlRun } from '@kars/kube-core/testing';

/** `kars apiserver` running as its own process (see {@link startApiserverProcess}). */
export interface ApiserverProcess {
  child: ChildProcess;
  url: string;
  kubeconfig: string;
  /** The admin bearer token and the CA certificate, read from the data dir. */
  token: string;
  ca: string;
  /** Resolves with the exit code once the process has exited. */
  exited(): Promise<number | null>;
}

const KARS_BIN = resolvePath(dirname(fileURLToPath(import.meta.url)), '../../../../apps/cli/bin/kars.js');

/**
 * Start `kars apiserver` as a real process (for crash tests and for timing the server apart from
 * the test's own event loop); resolves once it prints its kubeconfig and URL. The caller kills it.
 */
export function startApiserverProcess(dataDir: string, listen = '127.0.0.1:0', extraArgs: string[] = []): Promise<ApiserverProcess> {
  return new Promise((resolveProc, reject) => {
    const child = spawn(process.execPath, [KARS_BIN, 'apiserver', '--listen', listen, '--data-dir', dataDir, ...extraArgs], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr?.resume();
    let out = '';
    // Generous: on a loaded 2-core machine, key generation at first start alone can take many seconds.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`apiserver did not start within 60 s: ${out}`));
    }, 60_000);
    const exited = (): Promise<number | null> =>
      new Promise((r) =>
        child.exitCode !== null || child.signalCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code)),
      );
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const kc = out.match(/^kubeconfig: (.+)$/m);
      const url = out.match(/^listening: (https:\/\/\S+)$/m);
      if (kc?.[1] && url?.[1]) {
        clearTimeout(timer);
        const token = readFileSync(join(dataDir, 'token'), 'utf8').trim();
        const ca = readFileSync(join(dataDir, 'pki', 'ca.crt'), 'utf8');
        resolveProc({ child, url: url[1], kubeconfig: kc[1], token, ca, exited });
      }
    });
    child.once('exit', (code) => reject(new Error(`apiserver exited early with ${code}: ${out}`)));
  });
}
