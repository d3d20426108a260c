/**
 * The watch clients the freshness benchmarks compare (bench/freshness, bench/targets): one adapter
 * per cache implementation, each built the way its own documentation recommends, behind one small
 * interface ({@link Peer}). `log(msg)` receives lifecycle lines (reconnects, errors) without
 * timestamps; the caller adds them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeObject, Logger, LogFields } from '@kars/kube-core';
import { KubeClient, Resources } from '@kars/kube-client';
import { Reflector, watchConfigFromEnv } from '@kars/kube-runtime';
import type { WatchConfig } from '@kars/kube-runtime';
import { ROOT, errMsg } from '../../lib/dist/index.js';

/** The version of an installed npm package, '?' when it is not installed. */
export function pkgVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

export const CN_VERSION = pkgVersion('@kubernetes/client-node');
export const KFC_VERSION = pkgVersion('kubernetes-fluent-client');

/** The peers, by kind: how each is labelled in the tables, and how it notices a dead watch. */
export const PEERS = {
  kars: {
    label: 'kars Reflector (default: ping 5 s + 3 s, idle 90 s)',
    mechanism:
      'HTTP/2 PING every 5 s, connection dead when unanswered for 3 s (bound 8 s), then resume from the last resourceVersion; also a 90 s idle deadline, bookmarks requested (server sends one every 60 s)',
  },
  'kars-idle': {
    label: 'kars Reflector (pings off: idle deadline only)',
    mechanism:
      'no periodic PING: 90 s watch idle deadline (bookmarks every 60 s keep a healthy watch under it), then one PING probe with a 3 s timeout (bound 93 s) and resume',
  },
  'client-node': {
    label: `@kubernetes/client-node ${CN_VERSION} informer`,
    mechanism: `none in the client: no timeoutSeconds, no bookmarks, and ${CN_VERSION}'s 30 s AbortSignal timeout is overwritten before use; only TCP keepalive (30 s + 10×1 s ≈ 40 s), which works only if the network drops the probes; on error the informer stops until the app restarts it (official example: 5 s)`,
  },
  kfc: {
    label: `kubernetes-fluent-client ${KFC_VERSION} Watcher`,
    mechanism:
      'last-seen limit 600 s, checked every 5 s (≈605 s); relist-and-diff every 600 s; undici TCP keepalive 60 s + 10×1 s ≈ 70 s, which works only if the network drops the probes',
  },
} as const;

/** A peer kind. */
export type PeerKind = keyof typeof PEERS;
export const ALL_PEERS = Object.keys(PEERS) as PeerKind[];

/** ConfigMap data as a peer's cache holds it. */
export type ConfigMapData = Record<string, string> | undefined;

/** One watch cache of ConfigMaps, whatever its implementation. */
export interface Peer {
  /** The kars peers' watch configuration. */
  config?: WatchConfig;
  /** KFC's event counts, by event. */
  counts?: Record<string, number>;
  start(): void;
  size(): number;
  get(name: string): ConfigMapData;
  onChange(fn: (name: string | undefined, data: ConfigMapData) => void): void;
  stop(): Promise<void>;
}

/** What every peer needs. */
export interface PeerOptions {
  kubeconfig: string;
  namespace: string;
  log: (msg: string) => void;
  /** KFC only: the names whose data it keeps (it has no store of its own). */
  track?: readonly string[];
}

function karsPeer(kind: 'kars' | 'kars-idle', { kubeconfig, namespace, log: plog }: PeerOptions): Peer {
  // kars-idle: KARS_HTTP2_PING_INTERVAL_SECS=0 semantics (config and client both without periodic pings).
  const env = kind === 'kars-idle' ? { ...process.env, KARS_HTTP2_PING_INTERVAL_SECS: '0' } : process.env;
  const config = watchConfigFromEnv(env);
  const fields = (o: LogFields | undefined): string => {
    const s = JSON.stringify(o ?? {});
    return s === '{}' ? '' : ` ${s.slice(0, 200)}`;
  };
  // kube-core's Logger shape; the peer's log line carries the level and fields, not the bindings
  // (the peer's name already says which watch it is).
  const logger = (prefix: string): Logger => {
    const line =
      (level: string) =>
      (o: LogFields, msg: string): void =>
        plog(`${prefix}${level}${msg}${fields(o)}`);
    const l: Logger = { debug: () => undefined, info: line(''), warn: line('WARN '), error: line('ERROR '), child: () => l };
    return l;
  };
  const client = KubeClient.fromKubeconfig({
    kubeconfig,
    pingIntervalMs: config.pingIntervalMs,
    pingTimeoutMs: config.pingTimeoutMs,
    log: logger('transport: '),
  });
  const reflector = new Reflector<KubeObject & { data?: Record<string, string> }>({
    name: kind,
    client,
    resource: Resources.configmaps,
    namespace,
    config,
    log: logger(''),
  });
  const ac = new AbortController();
  let running: Promise<void> | undefined;
  return {
    config,
    start() {
      running = reflector.run(ac.signal);
    },
    size: () => reflector.store.size(),
    get: (name) => reflector.store.get(`${namespace}/${name}`)?.data,
    onChange(fn) {
      reflector.subscribe((c) => {
        if (c.type === 'apply') fn(c.object.metadata.name, c.object.data);
      });
    },
    async stop() {
      ac.abort();
      await running;
      client.close();
    },
  };
}

async function clientNodePeer({ kubeconfig, namespace, log: plog }: PeerOptions): Promise<Peer> {
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const api = kc.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${namespace}/configmaps`, () => api.listNamespacedConfigMap({ namespace }));
  const fns: Array<(name: string | undefined, data: ConfigMapData) => void> = [];
  let count = 0;
  let stopped = false;
  let restartTimer: NodeJS.Timeout | undefined;
  informer.on('add', (o) => {
    count++;
    for (const fn of fns) fn(o.metadata?.name, o.data);
  });
  informer.on('update', (o) => {
    for (const fn of fns) fn(o.metadata?.name, o.data);
  });
  informer.on('delete', () => count--);
  informer.on('connect', () => plog('connect event (informer (re)starting list/watch)'));
  // The official example (examples/typescript/informer/informer.ts): restart 5 s after an error.
  informer.on('error', (err: unknown) => {
    if (stopped) return;
    plog(`error event: ${errMsg(err)}; informer stopped, restart in 5 s (official example)`);
    restartTimer = setTimeout(() => {
      if (stopped) return;
      plog('informer.start() again');
      informer.start().catch((e: unknown) => plog(`informer.start() failed: ${errMsg(e)}`));
    }, 5000);
  });
  return {
    start() {
      informer.start().catch((e: unknown) => plog(`informer.start() failed: ${errMsg(e)}`));
    },
    size: () => count,
    get: (name) => informer.get(name, namespace)?.data,
    onChange: (fn) => void fns.push(fn),
    async stop() {
      stopped = true;
      clearTimeout(restartTimer);
      await informer.stop();
    },
  };
}

async function kfcPeer({ kubeconfig, namespace, log: plog, track = [] }: PeerOptions): Promise<Peer> {
  // KFC reads KUBECONFIG (client-node's loadFromDefault) on every request; the kubeconfig
  // carries the CA as certificate-authority-data, which KFC passes to its undici Agent.
  process.env['KUBECONFIG'] = kubeconfig;
  const { K8s, kind, WatchEvent } = await import('kubernetes-fluent-client');
  const tracked = new Set(track);
  const values = new Map<string, ConfigMapData>();
  const fns: Array<(name: string | undefined, data: ConfigMapData) => void> = [];
  let count = 0;
  const watcher = K8s(kind.ConfigMap)
    .InNamespace(namespace)
    .Watch((obj, phase) => {
      if (phase === 'ADDED') count++;
      else if (phase === 'DELETED') count--;
      const name = obj.metadata?.name;
      if (name !== undefined && tracked.has(name)) values.set(name, obj.data);
      for (const fn of fns) fn(name, obj.data);
    });
  const counts: Record<string, number> = {};
  let connected = false; // before the first CONNECT, LIST and CACHE_MISS are the initial list
  for (const ev of Object.values(WatchEvent)) {
    watcher.events.on(ev, (x: unknown) => {
      counts[ev] = (counts[ev] ?? 0) + 1;
      if (ev === WatchEvent.CONNECT) connected = true;
      if (ev === WatchEvent.DATA || ev === WatchEvent.INIT_CACHE_MISS) return;
      if (ev === WatchEvent.LIST) {
        if (connected) plog(`list (relist: ${(x as { items?: unknown[] } | undefined)?.items?.length ?? '?'} items)`);
        return;
      }
      if (ev === WatchEvent.CACHE_MISS) {
        if (connected) plog('cache_miss (a relist found a change the watch missed)');
        return;
      }
      plog(`${ev}${x !== undefined ? `: ${errMsg(x).slice(0, 160)}` : ''}`);
    });
  }
  return {
    start() {
      watcher.start().catch((e: unknown) => plog(`start() failed: ${errMsg(e)}`));
    },
    size: () => count,
    get: (name) => values.get(name),
    onChange: (fn) => void fns.push(fn),
    counts,
    stop() {
      watcher.close();
      return Promise.resolve();
    },
  };
}

/** A peer of `kind` (see {@link PEERS}) watching ConfigMaps in `opts.namespace` through `opts.kubeconfig`. */
export function createPeer(kind: string, opts: PeerOptions): Promise<Peer> {
  switch (kind) {
    case 'kars':
    case 'kars-idle':
      return Promise.resolve(karsPeer(kind, opts));
    case 'client-node':
      return clientNodePeer(opts);
    case 'kfc':
      return kfcPeer(opts);
    default:
      throw new Error(`unknown peer "${kind}" (use ${ALL_PEERS.join(', ')})`);
  }
}
