/**
 * Output for `kars` commands: kubectl-style tables, ages, and objects as YAML or JSON. Commands print through these
 * so `-o json` is the same shape everywhere and tables line up the same way.
 */
import { stringify } from 'yaml';

/** A usage or input error the user can fix: printed as `error: <message>`, exit code {@link CliError.exitCode}. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Columns padded to the widest cell plus three spaces, headers in upper case, as `kubectl get` prints. */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd((widths[i] ?? 0) + 3)))
      .join('')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** A duration in kubectl's short form: `45s`, `3m`, `2h`, `5d`. */
export function shortDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** Age of an RFC 3339 timestamp (`<unknown>` when absent or unparseable). */
export function age(timestamp: string | undefined, nowMs = Date.now()): string {
  const t = timestamp === undefined ? NaN : Date.parse(timestamp);
  return Number.isNaN(t) ? '<unknown>' : shortDuration(nowMs - t);
}

/** Render an object in an output format: `json` (two-space indented) or `yaml`. */
export function render(obj: unknown, format: 'json' | 'yaml'): string {
  return format === 'json' ? `${JSON.stringify(obj, null, 2)}\n` : stringify(obj);
}

/** Parse an `-o` value, failing with the allowed list. */
export function outputFormat<T extends string>(value: string | undefined, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new CliError(`-o must be one of ${allowed.join(', ')}, got "${value}"`);
}

/** `sha256:84a4e4604cae…` cut to 12 hex digits for tables; `-` when absent. */
export function shortDigest(d: string | null | undefined): string {
  if (d === undefined || d === null || d === '') return '-';
  const m = /^sha256:([0-9a-f]{12})/.exec(d);
  return m ? `sha256:${m[1] ?? ''}` : d;
}
