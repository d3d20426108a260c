/**
 * Phase 1: freshness after a silent drop. Every peer watches the same namespace in this process;
 * the server's watch connections are frozen (and, with BENCH_FAULT=blackhole, their packets
 * dropped), an edit is sent over a new connection, and each peer's time to hold it is taken.
 */
import { errMsg, expectStatus, fmt1, fmt2, log, nowUs, sleep } from '../../lib/dist/index.js';
import { createPeer } from '../../watch-peers/dist/index.js';
import type { Peer, PeerKind } from '../../watch-peers/dist/index.js';
import { Blackhole, clientPortsTo } from './network.js';
import type { Bench, PeerTrialResult, TrialRecord } from './results.js';

const nowMs = (): number => nowUs() / 1000;

/** Run the freshness trials; results go to `b.raw.trials`. */
export async function freshnessPhase(b: Bench): Promise<void> {
  const { cfg, srv, http, api, relayPort, failures, raw } = b;
  const { request } = http;
  const freshPeers = cfg.peers;
  const results = Object.fromEntries(freshPeers.map((p) => [p, [] as PeerTrialResult[]])) as Partial<Record<PeerKind, PeerTrialResult[]>>;
  const NS = 'fresh';
  const total = cfg.objects + 2;
  log(
    `1/3 freshness: ${total} ConfigMaps in "${NS}", peers ${freshPeers.join(', ')}, ${cfg.trials} trial(s), cap ${cfg.capSecs} s, fault ${cfg.fault}`,
  );
  await api.createMany(NS, 'cm-', cfg.objects);
  for (const name of ['sync-probe', 'target']) await api.createOne(NS, name);
  process.env['KUBECONFIG'] = srv.kubeconfig; // for KFC (set before it is imported)

  for (let trial = 1; trial <= cfg.trials; trial++) {
    const kinds = trial === 1 || cfg.rerunStuck ? freshPeers : freshPeers.filter((p) => results[p]?.[0]?.seenMs !== null);
    if (kinds.length === 0) break;
    log(`  trial ${trial}/${cfg.trials}: ${kinds.join(', ')}`);
    const tCreate = nowMs();
    const lifelog = Object.fromEntries(kinds.map((k) => [k, [] as Array<{ t: number; m: string }>])) as Record<
      PeerKind,
      Array<{ t: number; m: string }>
    >;
    const peers = {} as Record<PeerKind, Peer>;
    for (const k of kinds) {
      peers[k] = await createPeer(k, {
        kubeconfig: srv.kubeconfig,
        namespace: NS,
        log: (m) => lifelog[k].push({ t: nowMs(), m }),
        track: ['sync-probe', 'target'],
      });
    }
    const seenAt: Partial<Record<PeerKind, number>> = {};
    let edit: { value: string; tEdit: number } | undefined;
    for (const k of kinds) {
      peers[k].onChange((name, data) => {
        if (edit && name === 'target' && data?.['v'] === edit.value && seenAt[k] === undefined) seenAt[k] = nowMs();
      });
    }
    for (const k of kinds) peers[k].start();
    const waitAll = async (pred: (k: PeerKind) => boolean, ms: number, what: string): Promise<void> => {
      const deadline = nowMs() + ms;
      for (;;) {
        const missing = kinds.filter((k) => !pred(k));
        if (missing.length === 0) return;
        if (nowMs() > deadline)
          throw new Error(
            `trial ${trial}: ${missing.join(', ')} did not ${what} within ${ms / 1000} s (sizes ${missing.map((k) => `${k}=${peers[k].size()}`).join(', ')})`,
          );
        await sleep(25);
      }
    };
    const trialRec: TrialRecord = { trial, peers: kinds, fault: cfg.fault };
    try {
      await waitAll((k) => peers[k].size() >= total, 60_000, `list all ${total} objects`);
      const syncValue = `sync-${trial}-${Math.random().toString(36).slice(2, 8)}`;
      await api.patchData(NS, 'sync-probe', { v: syncValue }, true);
      await waitAll((k) => peers[k].get('sync-probe')?.['v'] === syncValue, 60_000, 'see the sync edit through its watch');
      trialRec.syncMs = nowMs() - tCreate;
      // The fault lands at a random point of kars' 10 s ping period (and that long after the
      // last byte every watch received), not at a fixed offset from the connection's start.
      trialRec.faultDelayMs = Math.random() * cfg.faultDelayMaxSecs * 1000;
      http.resetPool(); // the benchmark's own pooled connections are not part of the fault
      await sleep(trialRec.faultDelayMs);
      trialRec.connectionsBefore = clientPortsTo(relayPort).length;

      // Inject the silent drop, then edit through a fresh connection.
      const tFreeze = nowMs();
      const fr = expectStatus<{ frozen: number }>(
        await request('POST', '/debug/faults/freeze', undefined, { fresh: true }),
        [200],
        'POST /debug/faults/freeze',
      );
      trialRec.frozenStreams = fr.frozen;
      if (cfg.fault === 'blackhole') {
        const ports = clientPortsTo(relayPort);
        for (const p of ports) Blackhole.drop(p, relayPort);
        trialRec.blackholedConnections = ports.length;
      }
      const value = `edit-${trial}-${Math.random().toString(36).slice(2, 8)}`;
      const tEdit = nowMs();
      edit = { value, tEdit };
      trialRec.freezeToEditMs = tEdit - tFreeze;
      trialRec.editLatencyMs = await api.patchData(NS, 'target', { v: value }, true);
      log(
        `    froze ${fr.frozen} watch stream(s)${cfg.fault === 'blackhole' ? ` and black-holed ${trialRec.blackholedConnections} connection(s)` : ''}; edit sent; waiting up to ${cfg.capSecs} s`,
      );
      const capMs = cfg.capSecs * 1000;
      let lastNote = 0;
      for (;;) {
        for (const k of kinds) if (seenAt[k] === undefined && peers[k].get('target')?.['v'] === value) seenAt[k] = nowMs();
        const waited = nowMs() - tEdit;
        if (kinds.every((k) => seenAt[k] !== undefined) || waited >= capMs) break;
        if (waited - lastNote >= 30_000) {
          lastNote = waited;
          const pending = kinds.filter((k) => seenAt[k] === undefined);
          log(`    +${fmt1(waited / 1000)} s: waiting for ${pending.join(', ')}`);
        }
        await sleep(25);
      }
      const waitedMs = nowMs() - tEdit;
      trialRec.waitedMs = waitedMs;
      trialRec.connectionsAtEnd = clientPortsTo(relayPort).length;
      trialRec.results = {};
      for (const k of kinds) {
        const at = seenAt[k];
        const seenMs = at === undefined ? null : at - tEdit;
        const events = lifelog[k]
          .filter((e) => e.t >= tFreeze)
          .map((e) => ({ atSec: Number(((e.t - tEdit) / 1000).toFixed(2)), msg: e.m }));
        const counts = peers[k].counts;
        const r: PeerTrialResult = {
          seenMs,
          waitedMs: seenMs ?? waitedMs,
          events,
          ...(counts ? { kfcEventCounts: { ...counts } } : {}),
        };
        trialRec.results[k] = r;
        results[k]?.push(r);
        log(
          `    ${k}: ${seenMs === null ? `not seen within ${fmt1(waitedMs / 1000)} s` : `saw the edit after ${fmt2(seenMs / 1000)} s`}; ${events.length} lifecycle event(s) after the freeze`,
        );
      }
    } finally {
      for (const k of kinds) await peers[k].stop().catch((e: unknown) => failures.push(`stopping ${k}: ${errMsg(e)}`));
      if (cfg.fault === 'blackhole') Blackhole.flush();
      raw.trials.push(trialRec);
    }
    await sleep(500);
  }
}
