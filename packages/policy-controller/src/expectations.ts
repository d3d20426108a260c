/**
 * How the echoes a policy's descriptor expects (`ProfileKind.status(...).expect` in
 * `@kars/policy-compiler`) are awaited for the policy's mode: an enforced policy under its kinds, a
 * DryRun policy (ADR 0050) in its dry-run slots instead, never as the enforced kinds.
 */
import { dryRunSlot, enforcementModeOf } from '@kars/policy-api';
import type { DryRunKind } from '@kars/policy-api';
import type { ExpectedEcho } from './enforcement.js';

/** `expect` as the policy `name` with `spec` must be echoed: in its dry-run slots when the spec says DryRun. */
export function forMode(expect: readonly ExpectedEcho[], name: string, spec: { enforcement?: unknown } | undefined): ExpectedEcho[] {
  if (enforcementModeOf(spec) !== 'DryRun') return [...expect];
  return expect.map((e) => ({ ...e, dryRunSlot: dryRunSlot(e.kind as DryRunKind, name) }));
}
