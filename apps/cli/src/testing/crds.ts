/**
 * CRDs for CLI tests that are not the ones this CLI ships: a cluster that runs an older kars.
 */
import { inferencePolicyCrd } from '@kars/policy-api';

/**
 * The InferencePolicy CRD of a cluster older than this CLI: no spec.displayName. The field goes from
 * the schema and from the CEL rule that names it (kube-apiserver refuses a rule selecting an
 * undeclared field; so does kars apiserver). The client-side check (this CLI's schema) accepts
 * displayName; only fieldValidation=Strict makes the server refuse it instead of dropping it.
 */
export function inferencePolicyCrdWithoutDisplayName(): Record<string, any> {
  const crd = inferencePolicyCrd() as Record<string, any>;
  const spec = crd['spec'].versions[0].schema.openAPIV3Schema.properties.spec;
  delete spec.properties.displayName;
  for (const v of spec['x-kubernetes-validations'] ?? []) {
    v.rule = v.rule.replace(' || has(self.displayName)', '');
    v.message = v.message.replace(' and displayName', '');
  }
  if (JSON.stringify(spec['x-kubernetes-validations'] ?? []).includes('displayName'))
    throw new Error('inferencePolicyCrdWithoutDisplayName: a rule still names displayName; update this helper');
  return crd;
}
