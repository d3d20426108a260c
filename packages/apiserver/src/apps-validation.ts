/**
 * The part of kube-apiserver's apps/v1 Deployment validation that kars apiserver runs
 * (k8s.io/kubernetes v1.34 pkg/apis/apps/validation: ValidateDeploymentSpec, ValidatePodTemplateSpecForReplicaSet
 * and ValidateDeploymentUpdate): the selector is required, not empty, and matches the template's labels; the
 * template has containers; the selector never changes. Found missing by the differential suite (issue 19).
 *
 * The rest of the pod template's validation is not run: kars serves no pods.
 */
import { isObject, labelSelectorFromObject, matchesLabels } from '@kars/kube-core';
import type { KubeObject, LabelSelectorObject, StatusCause } from '@kars/kube-core';
import { requiredCause } from './field-errors.js';

const record = (v: unknown): Record<string, unknown> => (isObject(v) ? v : {});

/** Go's json.Marshal of a decoded value: map keys sorted, `<`, `>` and `&` escaped. */
function goJson(v: unknown): string {
  const sorted = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sorted)
      : isObject(x)
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, sorted(x[k])]),
          )
        : x;
  return JSON.stringify(sorted(v) ?? null).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
}

const hasEntries = (v: unknown): boolean => (Array.isArray(v) ? v.length > 0 : isObject(v) && Object.keys(v).length > 0);

/** A metav1.LabelSelector as Go marshals it: matchLabels, then matchExpressions (key, operator, values), empty ones left out. */
function selectorValue(sel: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (hasEntries(sel['matchLabels'])) out['matchLabels'] = sel['matchLabels'];
  if (hasEntries(sel['matchExpressions']))
    out['matchExpressions'] = (sel['matchExpressions'] as unknown[]).map((e) => {
      const r = record(e);
      return { key: r['key'] ?? '', operator: r['operator'] ?? '', ...(hasEntries(r['values']) ? { values: r['values'] } : {}) };
    });
  return out;
}

/** A selector's Go value for a message: null when there is none. */
const selectorText = (sel: unknown): string => (isObject(sel) ? goJson(selectorValue(sel)) : 'null');

/**
 * ValidateDeploymentSpec's selector and template checks. An absent or empty label map prints `null`: kube decodes
 * an emptied map (e.g. after an apply removed its keys) to none.
 */
function deploymentSpecCauses(obj: KubeObject): StatusCause[] {
  const spec = record(obj['spec']);
  const sel = spec['selector'];
  const causes: StatusCause[] = [];
  if (!isObject(sel)) causes.push(requiredCause('spec.selector'));
  else if (Object.keys(selectorValue(sel)).length === 0)
    causes.push(invalid('spec.selector', selectorText(sel), 'empty selector is invalid for deployment'));
  // LabelSelectorAsSelector: no selector selects nothing, an empty one everything; an unknown operator is an error.
  const requirements = isObject(sel) ? labelSelectorFromObject(sel as LabelSelectorObject) : [];
  if (requirements === undefined) return [...causes, invalid('spec.selector', selectorText(sel), 'invalid label selector')];
  const template = record(spec['template']);
  const labels = record(template['metadata'])['labels'];
  const selectsNothing = !isObject(sel);
  if (selectsNothing || (requirements.length > 0 && !matchesLabels(requirements, labels as Record<string, string> | undefined)))
    causes.push(
      invalid('spec.template.metadata.labels', hasEntries(labels) ? goJson(labels) : 'null', '`selector` does not match template `labels`'),
    );
  if (!hasEntries(record(template['spec'])['containers'])) causes.push(requiredCause('spec.template.spec.containers'));
  return causes;
}

const invalid = (field: string, value: string, why: string): StatusCause => ({
  reason: 'FieldValueInvalid',
  field,
  message: `Invalid value: ${value}: ${why}`,
});

/** apimachinery's Semantic.DeepEqual of two selectors, where an empty list or map equals none. */
function sameSelector(a: unknown, b: unknown): boolean {
  if (!isObject(a) || !isObject(b)) return isObject(a) === isObject(b);
  return goJson(selectorValue(a)) === goJson(selectorValue(b));
}

/** kube's Deployment validation, in its order: the spec's causes, then (on an update) the immutable selector. */
export function deploymentCauses(obj: KubeObject, old: KubeObject | undefined): StatusCause[] {
  const causes = deploymentSpecCauses(obj);
  if (old) {
    const sel = record(obj['spec'])['selector'];
    if (!sameSelector(sel, record(old['spec'])['selector'])) causes.push(invalid('spec.selector', selectorText(sel), 'field is immutable'));
  }
  return causes;
}
