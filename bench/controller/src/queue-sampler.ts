// The controller's work-queue depth and V8 heap over time, from its /metrics.

import { sleep } from '../../lib/dist/index.js';
import type { ControllerProcess } from './controller-process.js';
import { counterValues, parseProm } from './prom.js';

/** The controller's V8 heap in MB (prom-client default metrics; NaN when a metric is missing). */
export interface Heap {
  usedMb: number;
  totalMb: number;
  externalMb: number;
}

/** One sample: [ms since the controller's spawn, queue depth by controller, heap]. */
export type QueueSample = [number, Record<string, number>, Heap];

/** What {@link queueSampler} collects. */
export interface QueueSampler {
  samples: QueueSample[];
  /** The largest inferencepolicy queue depth seen. */
  readonly max: number;
  /** The inferencepolicy queue depth of the last sample. */
  last(): number | undefined;
  lastHeap(): Heap | undefined;
  maxHeapUsedMb(): number;
  stop(): Promise<void>;
}

/**
 * Sample the controller's work-queue depth (`kars_controller_queue_depth`, keys waiting, not
 * counting the ones being reconciled) and its V8 heap (prom-client default metrics) from its
 * /metrics every `intervalMs`.
 */
export function queueSampler(ctl: ControllerProcess, intervalMs = 500): QueueSampler {
  const samples: QueueSample[] = [];
  let stopped = false;
  let max = 0;
  const loop = (async () => {
    while (!stopped && !ctl.died) {
      const t = performance.now();
      try {
        const prom = parseProm(await ctl.metrics());
        const depth: Record<string, number> = {};
        for (const s of counterValues(prom, 'kars_controller_queue_depth')) depth[String(s.labels['controller'])] = s.value;
        const one = (name: string): number => counterValues(prom, name)[0]?.value ?? NaN;
        const heap: Heap = {
          usedMb: one('nodejs_heap_size_used_bytes') / 2 ** 20,
          totalMb: one('nodejs_heap_size_total_bytes') / 2 ** 20,
          externalMb: one('nodejs_external_memory_bytes') / 2 ** 20,
        };
        samples.push([Math.round(t - ctl.tSpawn), depth, heap]);
        max = Math.max(max, depth['inferencepolicy'] ?? 0);
      } catch {
        // not up yet
      }
      await sleep(Math.max(0, intervalMs - (performance.now() - t)));
    }
  })();
  return {
    samples,
    get max() {
      return max;
    },
    last: () => samples[samples.length - 1]?.[1]['inferencepolicy'],
    lastHeap: () => samples[samples.length - 1]?.[2],
    maxHeapUsedMb: () => Math.max(0, ...samples.map((x) => x[2].usedMb)),
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
