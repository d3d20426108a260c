import { isObject } from '@kars/kube-core';

/**
 * How kube-apiserver reduces a CRD's (structural) openAPIV3Schema before publishing it in
 * /openapi/v2: apiextensions-apiserver's ToStructuralOpenAPIV2, then kube-openapi's PruneDefaults.
 * Swagger 2.0 has no `nullable` and kubectl's v2 reader copes badly with untyped nodes that carry
 * items or properties, so, on every node, before its children are visited:
 *
 * - `allOf`, `anyOf`, `oneOf` and `not` go;
 * - a nullable node loses `type`, `items` and `properties`;
 * - a node with x-kubernetes-preserve-unknown-fields loses `items` and `properties`, and its
 *   `type` when that is `object`;
 * - an `array` left without `items` loses its `type`;
 * - a nullable property is no longer `required`; a nullable additionalProperties schema drops
 *   `required` altogether;
 * - `default` goes;
 * - the x-kubernetes-preserve-unknown-fields, -embedded-resource and -int-or-string extensions are
 *   only written when true (as the structural schema is turned back into OpenAPI).
 */

const JUNCTORS = ['allOf', 'anyOf', 'oneOf', 'not'];
const TRUE_ONLY = ['x-kubernetes-preserve-unknown-fields', 'x-kubernetes-embedded-resource', 'x-kubernetes-int-or-string'];

/** A copy of a CRD schema reduced as kube-apiserver publishes it in /openapi/v2 (see above). */
export function crdSchemaToV2(schema: Record<string, unknown>): Record<string, unknown> {
  const s: Record<string, unknown> = { ...schema };
  for (const k of JUNCTORS) delete s[k];
  delete s['default'];
  for (const k of TRUE_ONLY) if (k in s && s[k] !== true) delete s[k];
  const preserve = s['x-kubernetes-preserve-unknown-fields'] === true;
  if (s['nullable'] === true) {
    delete s['type'];
    delete s['items'];
    delete s['properties'];
  }
  delete s['nullable'];
  if (preserve) {
    delete s['items'];
    delete s['properties'];
  }
  if (s['items'] === undefined && s['type'] === 'array') delete s['type'];
  if (preserve && s['type'] === 'object') delete s['type'];
  if (Array.isArray(s['required'])) {
    const props = isObject(s['properties']) ? s['properties'] : {};
    const required = (s['required'] as unknown[]).filter((name) => !(typeof name === 'string' && isNullable(props[name])));
    if (required.length === 0 || isNullable(s['additionalProperties'])) delete s['required'];
    else s['required'] = required;
  }
  if (isObject(s['properties']))
    s['properties'] = Object.fromEntries(Object.entries(s['properties']).map(([name, p]) => [name, isObject(p) ? crdSchemaToV2(p) : p]));
  if (isObject(s['items'])) s['items'] = crdSchemaToV2(s['items']);
  if (isObject(s['additionalProperties'])) s['additionalProperties'] = crdSchemaToV2(s['additionalProperties']);
  return s;
}

function isNullable(schema: unknown): boolean {
  return isObject(schema) && schema['nullable'] === true;
}
