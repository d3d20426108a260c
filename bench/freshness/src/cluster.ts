/**
 * The server side of the benchmark: `kars apiserver` with fault injection (or, for the throughput
 * and memory phases, a real kube-apiserver from kube-envtest), the ConfigMaps the peers watch, and
 * the writes the benchmark makes through its own HTTPS client.
 */
import { findKubeBinaries, serviceAccountToken, startControlPlane } from '@kars/kube-envtest';
import { expectStatus, log, nowUs, runPool, startKarsApiserver } from '../../lib/dist/index.js';
import type { HttpsJsonClient, KarsApiserver } from '../../lib/dist/index.js';

const nowMs = (): number => nowUs() / 1000;

/** Start `kars apiserver` with fault injection as a child process. `died` is set (and logged) if it exits unasked. */
export async function startServer(dataDir: string, bookmarkSecs: number): Promise<KarsApiserver> {
  return startKarsApiserver(dataDir, ['--enable-fault-injection', '--bookmark-interval', String(bookmarkSecs)], {
    onDied: (h) => log(`${h.died}; stderr tail:\n${h.stderr.tail.slice(-10).join('\n')}`),
  });
}

/** The API server the peers watch, whichever it is. */
export interface BenchServer {
  /** How the report names it. */
  label: string;
  url: string;
  /** The CA that signed its serving certificate (PEM). */
  ca: string;
  /** A bearer token allowed everything, for the benchmark's own writes. */
  token: string;
  /** What the peer children connect with. */
  kubeconfig: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Start a real kube-apiserver (etcd and kube-apiserver, no controllers) under `dir`, with a token
 * for a cluster-admin ServiceAccount for the benchmark's own writes; the peers get the admin
 * kubeconfig. `{ skipped }` names `npm run kube:build` when the binaries are absent.
 */
export async function startKubeServer(dir: string): Promise<BenchServer | { skipped: string }> {
  const found = findKubeBinaries();
  if (!found.binaries) return { skipped: found.reason };
  const cp = await startControlPlane({ binaries: found.binaries, dir, controllers: false, log: (l) => log(`kube: ${l}`) });
  try {
    const created = async (path: string, body: unknown): Promise<void> => {
      const r = await cp.request(path, { method: 'POST', body });
      if (r.status !== 201) throw new Error(`POST ${path}: HTTP ${r.status}: ${r.body}`);
    };
    await created('/api/v1/namespaces/default/serviceaccounts', { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'bench' } });
    await created('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'bench-admin' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'bench', namespace: 'default' }],
    });
    const { token } = await serviceAccountToken(cp, 'default', 'bench', { expirationSeconds: 24 * 3600 });
    return {
      label: `kube-apiserver ${cp.version}`,
      url: cp.url,
      ca: cp.caPem,
      token,
      kubeconfig: cp.kubeconfig,
      pid: cp.apiserver.pid,
      stop: () => cp.stop(),
    };
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

/** A ConfigMap the way the benchmark writes it. */
export interface ConfigMap {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  data?: Record<string, string>;
  [k: string]: unknown;
}

/** ConfigMap `name` (the `i`-th of its namespace) with a 200-byte payload; `extra` adds data keys. */
export function configMap(name: string, i: number, extra: Record<string, string> = {}): ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      labels: { app: 'kars-bench', 'bench.kars.dev/shard': String(i % 16) },
      annotations: { 'bench.kars.dev/purpose': 'watch freshness benchmark' },
    },
    data: { v: 'initial', index: String(i), payload: 'x'.repeat(200), ...extra },
  };
}

/** The benchmark's writes to the server. */
export interface BenchApi {
  /** Create namespace `ns` (409 is fine). */
  createNs(ns: string): Promise<void>;
  /** Create namespace `ns` and ConfigMaps `<prefix>0` … `<prefix>(n-1)` in it; throws if any fails. */
  createMany(ns: string, prefix: string, n: number): Promise<void>;
  /** Create one ConfigMap `name` (as the 0th) in `ns`. */
  createOne(ns: string, name: string): Promise<void>;
  /** Merge-patch the data of `ns/name` (`fresh`: on a new connection); resolves with the milliseconds it took. */
  patchData(ns: string, name: string, data: Record<string, string>, fresh: boolean): Promise<number>;
}

/** The writes of {@link BenchApi} through `http`, `createConcurrency` creates in flight. */
export function benchApi(http: HttpsJsonClient, createConcurrency: number): BenchApi {
  const { request } = http;
  const createNs = async (ns: string): Promise<void> =>
    void expectStatus(
      await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }),
      [201, 409],
      `create namespace ${ns}`,
    );
  const createIn = async (ns: string, name: string, i: number, what: string): Promise<void> =>
    void expectStatus(
      await request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
        ...configMap(name, i),
        metadata: { ...configMap(name, i).metadata, namespace: ns },
      }),
      [201],
      what,
    );
  return {
    createNs,
    async createMany(ns, prefix, n) {
      await createNs(ns);
      const { errors: errs } = await runPool(n, createConcurrency, async (i) => {
        await createIn(ns, `${prefix}${i}`, i, `create ${ns}/${prefix}${i}`);
      });
      if (errs.length) throw new Error(`creating ${n} ConfigMaps in ${ns}: ${errs.length} failed (first: ${errs[0]})`);
    },
    createOne: (ns, name) => createIn(ns, name, 0, `create ${name}`),
    async patchData(ns, name, data, fresh) {
      const t0 = nowMs();
      expectStatus(
        await request(
          'PATCH',
          `/api/v1/namespaces/${ns}/configmaps/${name}`,
          { data },
          { fresh, contentType: 'application/merge-patch+json' },
        ),
        [200],
        `patch ${ns}/${name}`,
      );
      return nowMs() - t0;
    },
  };
}
