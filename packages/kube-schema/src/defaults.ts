/**
 * Defaulting as kube-apiserver does it: set `default` for missing properties (recursively, in
 * list items and map values), replace null by the default where the field is not nullable, and
 * drop non-nullable nulls that have no default.
 */
import { deepCopy, defineKey, hasOwn, isObject } from './json.js';
import { MAX_DEPTH, isNode, type Node } from './structural.js';

const RESOURCE_META = new Set(['apiVersion', 'kind', 'metadata']);

export function defaultValue(node: Node, value: unknown, resource: boolean, depth = 0): void {
  if (depth > MAX_DEPTH) return;
  if (Array.isArray(value)) {
    const items = node.items;
    if (items === undefined) return;
    for (let i = 0; i < value.length; i++) {
      if (value[i] === null && !items.nullable && items.hasDefault) value[i] = deepCopy(items.default);
      defaultValue(items, value[i], items.embedded, depth + 1);
    }
    return;
  }
  if (!isObject(value)) return;
  if (node.properties !== undefined) {
    for (const [name, p] of node.properties) {
      if (resource && RESOURCE_META.has(name)) continue;
      if (!hasOwn(value, name)) {
        if (p.hasDefault) defineKey(value, name, deepCopy(p.default));
      } else if (value[name] === null && !p.nullable) {
        if (p.hasDefault) value[name] = deepCopy(p.default);
        else delete value[name];
      }
      if (hasOwn(value, name)) defaultValue(p, value[name], p.embedded, depth + 1);
    }
  }
  const ap = node.additionalProperties;
  if (isNode(ap)) {
    for (const k of Object.keys(value)) {
      if (node.properties?.has(k) === true) continue;
      if (value[k] === null && !ap.nullable) {
        if (ap.hasDefault) value[k] = deepCopy(ap.default);
        else delete value[k];
      }
      if (hasOwn(value, k)) defaultValue(ap, value[k], ap.embedded, depth + 1);
    }
  }
}
