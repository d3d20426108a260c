/**
 * What routers must echo before a compiled policy is Ready: the one place the controller states it
 * (the reconciler and the contract property test both call these). An InferencePolicy is echoed
 * under `InferencePolicy`; a ToolPolicy under `ToolPolicy` (profile.json: scope, rate limit,
 * approval, pins) and, when it has an AGT profile, `AgtProfile`. A DryRun policy (ADR 0050) is
 * echoed in its slots instead, never as the enforced kinds.
 */
import { dryRunSlot, enforcementModeOf } from '@kars/policy-api';
import type { DryRunKind } from '@kars/policy-api';
import type { CompiledInferencePolicy, CompiledToolPolicy } from '@kars/policy-compiler';
import type { ExpectedEcho } from './enforcement.js';

/** The echoes of a compiled InferencePolicy. */
export function inferenceExpectation(c: Pick<CompiledInferencePolicy, 'compiledDigest'>): ExpectedEcho[] {
  return [{ kind: 'InferencePolicy', digest: c.compiledDigest }];
}

/** The echoes of a compiled ToolPolicy: profile.json always, the AGT profile when there is one. */
export function toolExpectation(c: Pick<CompiledToolPolicy, 'profileDigest' | 'agtProfileDigest'>): ExpectedEcho[] {
  const expect: ExpectedEcho[] = [{ kind: 'ToolPolicy', digest: c.profileDigest }];
  if (c.agtProfileDigest !== undefined) expect.push({ kind: 'AgtProfile', digest: c.agtProfileDigest });
  return expect;
}

/** `expect` as the policy `name` with `spec` must be echoed: in its dry-run slots when the spec says DryRun. */
export function forMode(expect: readonly ExpectedEcho[], name: string, spec: { enforcement?: unknown } | undefined): ExpectedEcho[] {
  if (enforcementModeOf(spec) !== 'DryRun') return [...expect];
  return expect.map((e) => ({ ...e, dryRunSlot: dryRunSlot(e.kind as DryRunKind, name) }));
}
