import { performance } from 'node:perf_hooks';

const traceAs = process.env['KARS_TRACE_HOPS'];

/** Whether hop tracing is on in this process (env `KARS_TRACE_HOPS=<process name>`). */
export const hopTracing = traceAs !== undefined && traceAs !== '';

/**
 * Debug trace of the freshness path (edit → controller → ConfigMap → router → echo Lease → probe).
 * Off unless `KARS_TRACE_HOPS` names this process; then each call writes one line to stderr:
 * `HOP {"p":<name>,"hop":<hop>,"t":<epoch ms with µs>,...fields}`. Epoch time (performance.timeOrigin
 * + now) lets lines from several processes on one machine be merged into one timeline, which
 * `scripts/freshness-hops.mjs` does per probe edit. Not for production: the writes are synchronous.
 */
export function traceHop(hop: string, fields: Record<string, unknown> = {}): void {
  if (!hopTracing) return;
  const t = Math.round((performance.timeOrigin + performance.now()) * 1000) / 1000;
  process.stderr.write(`HOP ${JSON.stringify({ p: traceAs, hop, t, ...fields })}\n`);
}
