import { performance } from 'node:perf_hooks';

/** The process name hop tracing writes under, read from the environment at the first call (not at import). */
let traceAs: string | null | undefined;

function tracingAs(): string | null {
  if (traceAs === undefined) {
    const v = process.env['KARS_TRACE_HOPS'];
    traceAs = v === undefined || v === '' ? null : v;
  }
  return traceAs;
}

/** Whether hop tracing is on in this process (env `KARS_TRACE_HOPS=<process name>`, read once, at the first call). */
export function hopTracing(): boolean {
  return tracingAs() !== null;
}

/**
 * Debug trace of the freshness path (edit → controller → ConfigMap → router → echo Lease → probe).
 * Off unless `KARS_TRACE_HOPS` names this process; then each call writes one line to stderr:
 * `HOP {"p":<name>,"hop":<hop>,"t":<epoch ms with µs>,...fields}`. Epoch time (performance.timeOrigin
 * + now) lets lines from several processes on one machine be merged into one timeline, which
 * `scripts/freshness-hops.mjs` does per probe edit. Not for production: the writes are synchronous.
 */
export function traceHop(hop: string, fields: Record<string, unknown> = {}): void {
  const p = tracingAs();
  if (p === null) return;
  const t = Math.round((performance.timeOrigin + performance.now()) * 1000) / 1000;
  process.stderr.write(`HOP ${JSON.stringify({ p, hop, t, ...fields })}\n`);
}
