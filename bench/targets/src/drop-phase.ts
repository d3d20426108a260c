// Phase 2: the three watch clients after a silent drop (our FaultRelay in front of the server).

import { join } from 'node:path';
import { KubeClient, Resources } from '@kars/kube-client';
import { FaultRelay } from '@kars/kube-core';
import { errMsg, fmt1, fmt2, log, sleep } from '../../lib/dist/index.js';
import { createPeer } from '../../watch-peers/dist/index.js';
import type { Peer, PeerKind } from '../../watch-peers/dist/index.js';
import type { Config } from './config.js';
import { configMap } from './objects.js';
import { relayKubeconfig } from './servers.js';
import type { Server } from './servers.js';
import { onShutdown } from './shutdown.js';
import { nowMs } from './util.js';

/** One client's result in a trial. */
export interface TrialResult {
  /** Milliseconds from the edit until the client's cache held it; null when not within the cap. */
  seenMs: number | null;
  /** Its lifecycle log lines after the freeze, `<seconds from the edit> s <line>`. */
  events: string[];
}

/** One drop trial, in the order its fields are set. */
export interface Trial {
  trial: number;
  results: Partial<Record<PeerKind, TrialResult>>;
  faultDelayMs?: number;
  connections?: number;
  frozen?: number;
  waitedMs?: number;
}

/** Run the drop trials against `srv` (files under `dir`); a failed trial is reported in `failures`. */
export async function dropPhase(srv: Server, cfg: Config, dir: string, failures: string[]): Promise<Trial[]> {
  const NS = 'bench-fresh';
  const api = KubeClient.fromKubeconfig({ kubeconfig: srv.kubeconfig });
  const relay = new FaultRelay(srv.port);
  const closeAll = onShutdown('fault relay and drop-phase client', async () => {
    await relay.close();
    api.close();
  });
  const trials: Trial[] = [];
  try {
    const relayPort = await relay.listen('127.0.0.1:0');
    const kubeconfig = relayKubeconfig(srv.kubeconfig, relayPort, join(dir, 'relay.kubeconfig'));
    await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    const names = [...Array.from({ length: cfg.objects }, (_, i) => `cm-${i}`), 'sync-probe', 'target'];
    for (let i = 0; i < names.length; i += 16)
      await Promise.all(names.slice(i, i + 16).map((n, j) => api.create(Resources.configmaps, configMap(NS, n, i + j))));
    const patch = (name: string, v: string): Promise<unknown> => api.patch(Resources.configmaps, NS, name, { data: { v } }, 'merge');
    // KFC reads KUBECONFIG (client-node's loadFromDefault) on every request.
    process.env['KUBECONFIG'] = kubeconfig;
    const seenInFirst: Partial<Record<PeerKind, boolean>> = {};
    for (let trial = 1; trial <= cfg.trials; trial++) {
      const kinds = trial === 1 || cfg.rerunStuck ? cfg.peers : cfg.peers.filter((p) => seenInFirst[p]);
      if (kinds.length === 0) break;
      log(`  trial ${trial}/${cfg.trials}: ${kinds.join(', ')}`);
      const lifelog = new Map<PeerKind, Array<{ t: number; m: string }>>(kinds.map((k) => [k, []]));
      const peers = new Map<PeerKind, Peer>();
      const peerOf = (k: PeerKind): Peer => {
        const p = peers.get(k);
        if (!p) throw new Error(`trial ${trial}: no ${k} peer`);
        return p;
      };
      const rec: Trial = { trial, results: {} };
      try {
        for (const k of kinds)
          peers.set(
            k,
            await createPeer(k, {
              kubeconfig,
              namespace: NS,
              log: (m) => lifelog.get(k)?.push({ t: nowMs(), m }),
              track: ['sync-probe', 'target'],
            }),
          );
        const seenAt: Partial<Record<PeerKind, number>> = {};
        let editValue: string | undefined = undefined; // set just before the edit; the callbacks read it
        for (const k of kinds)
          peerOf(k).onChange((name, data) => {
            if (editValue !== undefined && name === 'target' && data?.['v'] === editValue && seenAt[k] === undefined) seenAt[k] = nowMs();
          });
        for (const k of kinds) peerOf(k).start();
        const waitAll = async (pred: (k: PeerKind) => boolean, ms: number, what: string): Promise<void> => {
          const deadline = nowMs() + ms;
          for (;;) {
            const missing = kinds.filter((k) => !pred(k));
            if (missing.length === 0) return;
            if (nowMs() > deadline) throw new Error(`trial ${trial}: ${missing.join(', ')} did not ${what} within ${ms / 1000} s`);
            await sleep(25);
          }
        };
        await waitAll((k) => peerOf(k).size() >= names.length, 60_000, `list all ${names.length} objects`);
        const syncValue = `sync-${trial}-${Math.random().toString(36).slice(2, 8)}`;
        await patch('sync-probe', syncValue);
        await waitAll((k) => peerOf(k).get('sync-probe')?.['v'] === syncValue, 60_000, 'see the sync edit through its watch');
        rec.faultDelayMs = Math.random() * cfg.faultDelayMaxSecs * 1000;
        await sleep(rec.faultDelayMs);
        rec.connections = relay.size;
        const tFreeze = nowMs();
        rec.frozen = relay.freeze();
        editValue = `edit-${trial}-${Math.random().toString(36).slice(2, 8)}`;
        const tEdit = nowMs();
        await patch('target', editValue); // straight to the server, not through the relay
        log(`    froze ${rec.frozen} of ${rec.connections} relayed connection(s); edit sent; waiting up to ${cfg.capSecs} s`);
        for (;;) {
          for (const k of kinds) if (seenAt[k] === undefined && peerOf(k).get('target')?.['v'] === editValue) seenAt[k] = nowMs();
          if (kinds.every((k) => seenAt[k] !== undefined) || nowMs() - tEdit >= cfg.capSecs * 1000) break;
          await sleep(25);
        }
        const waitedMs = (rec.waitedMs = nowMs() - tEdit);
        for (const k of kinds) {
          const at = seenAt[k];
          const seenMs = at === undefined ? null : at - tEdit;
          if (trial === 1) seenInFirst[k] = seenMs !== null;
          rec.results[k] = {
            seenMs,
            events: (lifelog.get(k) ?? []).filter((e) => e.t >= tFreeze).map((e) => `${fmt1((e.t - tEdit) / 1000)} s ${e.m}`.slice(0, 160)),
          };
          log(
            `    ${k}: ${seenMs === null ? `not seen within ${fmt1(waitedMs / 1000)} s` : `saw the edit after ${fmt2(seenMs / 1000)} s`}`,
          );
        }
      } catch (err) {
        failures.push(`${srv.label}, drop trial ${trial}: ${errMsg(err)}`);
      } finally {
        for (const [k, p] of peers) await p.stop().catch((e: unknown) => failures.push(`${srv.label}: stopping ${k}: ${errMsg(e)}`));
        relay.resetAll(); // the frozen connections go; the next trial starts clean
        trials.push(rec);
      }
      await sleep(500);
    }
  } finally {
    await closeAll();
  }
  return trials;
}
