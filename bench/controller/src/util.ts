// Helpers (same conventions as bench/apiserver): env integers, stats, /proc readings that
// never throw, a plain-HTTP GET, and small formatting and array helpers.

import http from 'node:http';
import { envInt as envIntBase, fmt1, percentile, procCpu, procStatus as procStatusBase } from '../../lib/dist/index.js';

/** `ms` as seconds with one decimal; 'n/a' when missing. */
export const fmtS = (ms: number | null | undefined): string => (ms === null || ms === undefined ? 'n/a' : fmt1(ms / 1000));

/** {@link fmt1} of a value that may be missing (printed as `undefined`, as the script always did). */
export const fmt1Opt = (v: number | undefined): string => (v === undefined ? String(v) : fmt1(v));

/** Remove the first `f` from `arr` (in place), if it is there. */
export function remove<T>(arr: T[], f: T): void {
  const i = arr.indexOf(f);
  if (i >= 0) arr.splice(i, 1);
}

/** Non-negative integer from the environment (0 is allowed here, unlike bench/apiserver). */
export const envInt = (name: string, def: number): number => envIntBase(name, def, { min: 0 });

/** Count, p50, p99, max and min of the finite values. */
export interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
  min: number;
}

/** {@link Stats} of `values` (non-finite values are left out; NaNs when none is left). */
export function stats(values: readonly number[]): Stats {
  const s = Float64Array.from(values.filter((v) => Number.isFinite(v))).sort();
  return {
    n: s.length,
    p50: percentile(s, 0.5),
    p99: percentile(s, 0.99),
    max: s.length ? (s[s.length - 1] ?? NaN) : NaN,
    min: s.length ? (s[0] ?? NaN) : NaN,
  };
}

/** VmRSS / VmHWM in kB; NaN once the process is gone. */
export const procStatus = (pid: number): { rssKb: number; hwmKb: number } => procStatusBase(pid, { safe: true });

/** CPU time (user+system) in seconds of a process; NaN once it is gone. */
export const procCpuSec = (pid: number): number => procCpu(pid, { safe: true }).total;

/** GET `url` over plain HTTP: `{ status, text }`; rejects on a network error or after `timeoutMs` idle. */
export function httpGet(url: string, timeoutMs = 5000): Promise<{ status: number; text: string }> {
  return new Promise((res, rej) => {
    const req = http.get(url, { timeout: timeoutMs }, (r) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => res({ status: r.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      r.on('error', rej);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', rej);
  });
}
