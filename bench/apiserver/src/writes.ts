/** The unmeasured warm-up and phases 1 and 2: create and update throughput in namespace `bench`. */
import { expectStatus, fmt1, fmt2, fmtInt, log, runPool } from '../../lib/dist/index.js';
import { CONC } from './config.js';
import { runPartitioned, stats } from './measure.js';
import { NS } from './phase.js';
import type { KubeObj, PhaseContext } from './phase.js';

/**
 * Create the namespaces `bench` and `warmup`, then the unmeasured warm-up in `warmup`: JIT and
 * connection setup, so phase 1 is not a cold start. Returns how many ConfigMaps it stored.
 */
export async function warmUp({ cfg, request, failures }: PhaseContext): Promise<number> {
  expectStatus(
    await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }),
    [201, 409],
    'create namespace',
  );

  // ---- warm-up (unmeasured): JIT and connection setup, so phase 1 is not a cold start --------
  const WARM = Math.min(200, cfg.creates);
  expectStatus(
    await request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'warmup' } }),
    [201, 409],
    'create namespace warmup',
  );
  const wu = await runPool(WARM, CONC, async (i) => {
    const o = expectStatus<KubeObj>(
      await request('POST', '/api/v1/namespaces/warmup/configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `w-${i}` },
        data: { i: String(i) },
      }),
      [201],
      `warm-up create w-${i}`,
    );
    expectStatus(
      await request('PUT', `/api/v1/namespaces/warmup/configmaps/w-${i}`, { ...o, data: { i: String(i), u: '1' } }),
      [200],
      `warm-up update w-${i}`,
    );
  });
  if (wu.errors.length) failures.push(`warm-up: ${wu.errors.length} failed (first: ${wu.errors[0]})`);
  return WARM;
}

/** Phase 1: `cfg.creates` ConfigMaps `cm-<i>`, CONC in flight. Returns their resourceVersions by index. */
export async function createPhase(ctx: PhaseContext): Promise<Array<string | undefined>> {
  const { cfg, request, add, failures, raw } = ctx;
  // ---- 1. create throughput ---------------------------------------------------------------
  log(`1/4 create: ${cfg.creates} ConfigMaps, concurrency ${CONC}`);
  const rvs = new Array<string | undefined>(cfg.creates);
  const m0 = ctx.cpuMark();
  const cr = await runPool(cfg.creates, CONC, async (i) => {
    const body = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `cm-${i}`, labels: { bench: 'true' } },
      data: { index: String(i), payload: 'x'.repeat(64) },
    };
    const o = expectStatus<KubeObj>(await request('POST', `/api/v1/namespaces/${NS}/configmaps`, body), [201], `create cm-${i}`);
    rvs[i] = o.metadata.resourceVersion;
  });
  const cpu = ctx.cpuNote(m0, cfg.creates);
  const st = stats(cr.lat);
  raw['create'] = { ...st, wallMs: cr.wallMs, errors: cr.errors.length, ...cpu };
  add(
    'Create throughput',
    cfg.creates / (cr.wallMs / 1000),
    'ops/s',
    `${fmtInt(cfg.creates / (cr.wallMs / 1000))} ops/s`,
    `${fmtInt(cfg.creates)} POSTs, concurrency ${CONC}, HTTP/1.1 keep-alive; ${cpu.note}`,
  );
  add('Create latency p50 / p99', [st.p50, st.p99], 'ms', `${fmt2(st.p50)} / ${fmt2(st.p99)} ms`, `max ${fmt1(st.max)} ms`);
  if (cr.errors.length) failures.push(`create: ${cr.errors.length} failed (first: ${cr.errors[0]})`);
  return rvs;
}

/**
 * Phase 2: `cfg.updates` PUTs of the objects of phase 1 with their current resourceVersion, CONC in
 * flight, partitioned so the benchmark causes no 409s. Updates `rvs` in place.
 */
export async function updatePhase(ctx: PhaseContext, rvs: Array<string | undefined>): Promise<void> {
  const { cfg, request, add, failures, raw } = ctx;
  // ---- 2. update throughput ---------------------------------------------------------------
  log(`2/4 update: ${cfg.updates} PUTs, concurrency ${CONC}`);
  const m0 = ctx.cpuMark();
  const up = await runPartitioned(cfg.updates, CONC, cfg.creates, async (i, j) => {
    if (rvs[j] === undefined) throw new Error(`cm-${j} was not created`);
    const body = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `cm-${j}`, namespace: NS, labels: { bench: 'true' }, resourceVersion: rvs[j] },
      data: { index: String(j), update: String(i), payload: 'y'.repeat(64) },
    };
    const o = expectStatus<KubeObj>(await request('PUT', `/api/v1/namespaces/${NS}/configmaps/cm-${j}`, body), [200], `update cm-${j}`);
    rvs[j] = o.metadata.resourceVersion;
  });
  const cpu = ctx.cpuNote(m0, cfg.updates);
  const st = stats(up.lat);
  raw['update'] = { ...st, wallMs: up.wallMs, errors: up.errors.length, ...cpu };
  add(
    'Update throughput',
    cfg.updates / (up.wallMs / 1000),
    'ops/s',
    `${fmtInt(cfg.updates / (up.wallMs / 1000))} ops/s`,
    `${fmtInt(cfg.updates)} PUTs with resourceVersion, concurrency ${CONC}; ${cpu.note}`,
  );
  add('Update latency p50 / p99', [st.p50, st.p99], 'ms', `${fmt2(st.p50)} / ${fmt2(st.p99)} ms`, `max ${fmt1(st.max)} ms`);
  if (up.errors.length) failures.push(`update: ${up.errors.length} failed (first: ${up.errors[0]})`);
}
