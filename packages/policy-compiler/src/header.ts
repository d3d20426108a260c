/** The checks every policy compiler starts with, in one place (see {@link policyHeader}). */
import { isObject } from '@kars/kube-core';
import { fail, type CompileResult } from './result.js';

/** The parts every policy kind needs before its content is compiled. */
export interface PolicyHeader<S extends { appliesTo?: unknown }> {
  name: string;
  spec: S;
  appliesTo: NonNullable<S['appliesTo']>;
}

/**
 * Check what every policy kind needs (metadata.name, an object spec, an object spec.appliesTo);
 * the failure names the first one missing. Input may be malformed whatever its type says.
 */
export function policyHeader<S extends { appliesTo?: unknown }>(policy: {
  metadata: { name?: string | undefined };
  spec: S;
}): CompileResult<PolicyHeader<S>> {
  const name = policy.metadata.name;
  if (!name) return fail('InvalidSpec', 'metadata.name', 'metadata.name is required');
  const spec = policy.spec as S | undefined;
  if (!isObject(spec)) return fail('InvalidSpec', 'spec', 'spec is required');
  const appliesTo = spec.appliesTo as S['appliesTo'] | undefined;
  if (!isObject(appliesTo)) return fail('InvalidSpec', 'spec.appliesTo', 'spec.appliesTo is required');
  return { ok: true, name, spec, appliesTo: appliesTo as NonNullable<S['appliesTo']> };
}
