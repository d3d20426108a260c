/** Pruning: drop fields the schema does not declare, as kube-apiserver does before storing. */
import { isObject } from './json.js';
import { MAX_DEPTH, isNode, type Node } from './structural.js';

const RESOURCE_META = new Set(['apiVersion', 'kind', 'metadata']);

/**
 * Prune value in place against node. `resource` marks the root or an embedded resource. When `out`
 * is given, the path of every removed field is appended to it, in kube's syntax (`spec.items[0].x`,
 * map keys joined with dots, as kube-apiserver's pruning reports them), in document order.
 */
export function pruneValue(node: Node, value: unknown, resource: boolean, depth = 0, out?: string[], path = ''): void {
  if (depth > MAX_DEPTH) return;
  if (Array.isArray(value)) {
    const items = node.items;
    if (items !== undefined)
      for (let i = 0; i < value.length; i++) pruneValue(items, value[i], items.embedded, depth + 1, out, out ? `${path}[${i}]` : '');
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
    const at = out ? (path === '' ? k : `${path}.${k}`) : '';
    if (p !== undefined) pruneValue(p, value[k], p.embedded, depth + 1, out, at);
    else if (isNode(ap)) pruneValue(ap, value[k], ap.embedded, depth + 1, out, at);
    else if (!keepUnknown) {
      delete value[k];
      out?.push(at);
    }
  }
}
