/** Laying `apply` flags over a policy spec, shared by `kars inferencepolicy apply` and `kars toolpolicy apply`. */
import { labels } from '../lib/flags.js';

/**
 * Flag values for some fields of `T`, undefined where the flag was not given. Values are as the flags give them
 * (e.g. `wholeNumber`'s pass-through string): policy-api's validation of the whole spec checks them afterwards.
 */
export type FieldFlags<T> = { [K in keyof T]?: unknown };

/** The entries of `fields` whose flag was given (value not undefined), in their order. */
function given<T>(fields: FieldFlags<T>): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * A spec's `appliesTo` with flags laid over it: every given field, and the `--sandbox-label k=v` labels merged into
 * `sandboxMatchLabels`. Always a fresh object (`{}` when the spec had none), so `apply` writes one.
 */
export function appliesToWith<A extends { sandboxMatchLabels?: Record<string, string> }>(
  base: A | undefined,
  fields: FieldFlags<A>,
  sandboxLabel: string[] | undefined,
): A {
  const at = { ...base, ...given(fields) } as A;
  const lbl = labels(sandboxLabel, '--sandbox-label');
  if (lbl) at.sandboxMatchLabels = { ...(at.sandboxMatchLabels ?? {}), ...lbl };
  return at;
}

/**
 * Lay the given `fields` over the section `spec[key]` (a copy of it, or a new one when absent). A section none of
 * whose flags was given is left as it was, absent included.
 */
export function overlaySection<S, K extends keyof S>(spec: S, key: K, fields: FieldFlags<NonNullable<S[K]>>): void {
  const set = given(fields);
  if (Object.keys(set).length > 0) spec[key] = { ...(spec[key] ?? {}), ...set } as S[K];
}
