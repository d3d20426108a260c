/** Pruning: drop fields the schema does not declare, as kube-apiserver does before storing. */
import { isObject } from './json.js';
import { MAX_DEPTH, isNode, type Node } from './structural.js';

const RESOURCE_META = new Set(['apiVersion', 'kind', 'metadata']);

/** Prune value in place against node. `resource` marks the root or an embedded resource. */
export function pruneValue(node: Node, value: unknown, resource: boolean, depth = 0): void {
  if (depth > MAX_DEPTH) return;
  if (Array.isArray(value)) {
    if (node.items !== undefined) for (const item of value) pruneValue(node.items, item, node.items.embedded, depth + 1);
    return;
  }
  if (!isObject(value)) return;
  const ap = node.additionalProperties;
  const keepUnknown = node.preserveUnknown || ap === true;
  // A bare preserve-unknown node (no properties, no map schema) keeps everything below it.
  if (keepUnknown && node.properties === undefined && !isNode(ap)) return;
  for (const k of Object.keys(value)) {
    if (resource && RESOURCE_META.has(k)) continue;
    const p = node.properties?.get(k);
    if (p !== undefined) pruneValue(p, value[k], p.embedded, depth + 1);
    else if (isNode(ap)) pruneValue(ap, value[k], ap.embedded, depth + 1);
    else if (!keepUnknown) delete value[k];
  }
}
