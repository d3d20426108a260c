import { detectionBoundMs } from '@kars/kube-runtime';
import type { FaultStack } from './stack.js';
import { SUITE_KNOBS, suiteWatchConfig } from './stack.js';

/** The faults of issue 8, one at a time. */
export type FaultName = 'freeze' | 'reset' | 'apiserver-restart' | 'compaction' | 'controller-kill' | 'leader-failover' | 'router-restart';

export const FAULTS: readonly FaultName[] = [
  'freeze',
  'reset',
  'apiserver-restart',
  'compaction',
  'controller-kill',
  'leader-failover',
  'router-restart',
];

const leaseMs = Number(SUITE_KNOBS['LEADER_ELECTION_LEASE_DURATION_SECS']) * 1000;

/**
 * The configured detection bound for each fault (ms): how long the stack may take to notice it with
 * the suite's knobs, before the +2 s the suite allows for the edit itself.
 * - freeze: a silently dead connection, found by PING (interval + timeout) or the idle deadline;
 * - reset, apiserver restart, compaction (410, forced by a reset after compacting): the stream fails
 *   at once; one watch backoff (≤ 1 s first delay) plus the PING bound for a half-open session;
 * - controller kill -9 / leader failover: the dead leader's Lease must expire (lease duration) before
 *   a controller leads again, plus the PING bound for its first watches;
 * - router restart: a process restart (the old instance withdraws its echo; the new one lists and echoes),
 *   bounded like a reset.
 */
export function detectionBound(fault: FaultName): number {
  const ping = detectionBoundMs(suiteWatchConfig());
  switch (fault) {
    case 'freeze':
      return ping;
    case 'reset':
    case 'apiserver-restart':
    case 'compaction':
    case 'router-restart':
      return ping + 1000;
    case 'controller-kill':
    case 'leader-failover':
      return leaseMs + ping;
  }
}

/** How to inject each fault but `compaction` (which also reports a revision); what the stack call resolves with is not used. */
const INJECT: Record<Exclude<FaultName, 'compaction'>, (stack: FaultStack) => Promise<unknown>> = {
  freeze: (stack) => stack.freeze(),
  reset: (stack) => stack.reset(),
  'apiserver-restart': (stack) => stack.restartApiserver(),
  'controller-kill': (stack) => stack.killControllers(),
  'leader-failover': (stack) => stack.failoverController(),
  'router-restart': (stack) => stack.restartRouter(),
};

/**
 * Inject one fault into a stack (kars apiserver's own fault injection, or kube-apiserver's relay,
 * etcd and restart). Resolves with the revision compacted to for `compaction`, else undefined.
 */
export async function inject(stack: FaultStack, fault: FaultName): Promise<number | undefined> {
  if (fault === 'compaction') {
    // Compact, then cut every connection: each watch resumes from a resourceVersion now compacted.
    const revision = await stack.compact();
    await stack.reset();
    return revision;
  }
  await INJECT[fault](stack);
  return undefined;
}

/** Faults a suite pointed at a foreign cluster (KARS_CONFORMANCE_KUBECONFIG) can cause, and why the others are skipped. */
export function foreignSkipReason(fault: FaultName): string {
  switch (fault) {
    case 'freeze':
    case 'reset':
    case 'apiserver-restart':
    case 'compaction':
      return 'needs kars apiserver fault injection (POST /debug/faults/*), which a foreign cluster does not serve';
    case 'controller-kill':
    case 'leader-failover':
      return 'needs to kill the controller processes, which the suite does not own on a foreign cluster';
    case 'router-restart':
      return 'needs to restart the probe router process, which the suite does not own on a foreign cluster';
  }
}
