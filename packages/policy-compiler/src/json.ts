/** Small helpers shared by the compilers. */
import { fail, type CompileFailure } from './result.js';

/** A copy of `labels` with keys in ascending UTF-16 order (identical to byte order for label keys, which are ASCII). */
export function sortedLabels(labels: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (labels === undefined) return out;
  for (const k of Object.keys(labels).sort()) {
    const v = labels[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * Check that an optional numeric field is a non-negative safe integer (u64/u32 in the reference
 * types), so `JSON.stringify` can never write `null` for NaN or lose precision silently.
 */
export function checkUint(value: unknown, field: string, max = Number.MAX_SAFE_INTEGER): CompileFailure | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > max) {
    return fail('InvalidSpec', field, `${field} must be an integer between 0 and ${max}, got ${JSON.stringify(value) ?? String(value)}`);
  }
  return undefined;
}

/** `value ?? null`, typed for the compiled JSON. */
export function orNull<T>(value: T | undefined): T | null {
  return value === undefined ? null : value;
}

/** `spec.enforcement` must be absent, `Enforce` or `DryRun` (ADR 0050): anything else would silently compile as enforced. */
export function checkEnforcement(value: unknown): CompileFailure | undefined {
  if (value === undefined || value === 'Enforce' || value === 'DryRun') return undefined;
  return fail(
    'InvalidSpec',
    'spec.enforcement',
    `spec.enforcement must be Enforce or DryRun, got ${JSON.stringify(value) ?? String(value)}`,
  );
}
