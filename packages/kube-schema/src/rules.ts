/** Evaluates x-kubernetes-validations CEL rules over an object, correlating old values for transition rules. */
import type { CelInput } from '@bufbuild/cel';
import { escapeProperty } from './cel.js';
import { invalid, renderValue, type SchemaCause } from './causes.js';
import { canonical, hasOwn, isObject } from './json.js';
import { appendFieldPath, child, index, key } from './path.js';
import { MAX_DEPTH, MAX_VALUE_DEPTH, isNode, type Node, type Rule } from './structural.js';

/** An old value at the same place, or absent. */
type Old = { value: unknown } | undefined;

/** Evaluate every rule of the schema over obj; `skip`: names of the root's children not to descend into. */
export function validateRules(root: Node, obj: unknown, old: Old, out: SchemaCause[], skip?: ReadonlySet<string>): void {
  walk(root, obj, old, '', out, 0, new WeakMap(), skip);
}

const readsOldCache = new WeakMap<Node, boolean>();

/** Whether a rule at this node or below it (or its message) reads oldSelf. */
export function readsOldSelfBelow(node: Node, depth = 0): boolean {
  const hit = readsOldCache.get(node);
  if (hit !== undefined) return hit;
  let r = depth > MAX_DEPTH || node.rules.some((x) => x.program.usesOldSelf || x.messageExpression?.usesOldSelf === true);
  if (!r) for (const p of node.properties?.values() ?? []) if ((r = readsOldSelfBelow(p, depth + 1))) break;
  if (!r && node.items !== undefined) r = readsOldSelfBelow(node.items, depth + 1);
  if (!r && isNode(node.additionalProperties)) r = readsOldSelfBelow(node.additionalProperties, depth + 1);
  readsOldCache.set(node, r);
  return r;
}

function walk(
  node: Node,
  value: unknown,
  old: Old,
  path: string,
  out: SchemaCause[],
  depth: number,
  cache: WeakMap<object, CelInput>,
  skip?: ReadonlySet<string>,
): void {
  if (value === undefined || depth > MAX_DEPTH) return;
  if (node.rules.length > 0 && value !== null) {
    const self = toCel(node, value, 0, cache);
    // The old value is converted only for a rule (or its message) that reads oldSelf: converting it
    // for every rule tripled the cost of admitting an update.
    let oldSelf: CelInput | undefined;
    let oldConverted = false;
    for (const rule of node.rules) {
      const readsOld = rule.program.usesOldSelf || rule.messageExpression?.usesOldSelf === true;
      if (readsOld && !oldConverted) {
        oldSelf = old === undefined ? undefined : toCel(node, old.value, 0, cache);
        oldConverted = true;
      }
      if (rule.program.usesOldSelf && oldSelf === undefined) continue;
      const cause = evaluate(rule, node, value, self, readsOld ? oldSelf : undefined, path);
      if (cause !== undefined) out.push(cause);
    }
  }
  if (isObject(value)) {
    const oldObj = old !== undefined && isObject(old.value) ? old.value : undefined;
    const at = (k: string): Old => (oldObj !== undefined && hasOwn(oldObj, k) ? { value: oldObj[k] } : undefined);
    for (const [name, p] of node.properties ?? []) {
      if (skip?.has(name) === true) continue;
      if (hasOwn(value, name)) walk(p, value[name], at(name), child(path, name), out, depth + 1, cache);
    }
    const ap = node.additionalProperties;
    if (isNode(ap)) {
      for (const [k, v] of Object.entries(value)) {
        if (skip?.has(k) === true) continue;
        if (node.properties?.has(k) !== true) walk(ap, v, at(k), key(path, k), out, depth + 1, cache);
      }
    }
  } else if (Array.isArray(value) && node.items !== undefined) {
    const oldList = old !== undefined && Array.isArray(old.value) ? old.value : undefined;
    const correlate = listCorrelator(node, oldList);
    for (let i = 0; i < value.length; i++) walk(node.items, value[i], correlate(value[i]), index(path, i), out, depth + 1, cache);
  }
}

/** Old list items correlate by map keys (list-type map) or by value (set); atomic lists do not correlate. */
function listCorrelator(node: Node, oldList: unknown[] | undefined): (v: unknown) => Old {
  if (oldList === undefined || (node.listType !== 'map' && node.listType !== 'set')) return () => undefined;
  const byKey = new Map<string, unknown>();
  const keyOf = (v: unknown): string => {
    if (node.listType === 'set') return canonical(v);
    if (!isObject(v)) return '';
    return canonical(node.listMapKeys.map((k) => (hasOwn(v, k) ? v[k] : null)));
  };
  for (const o of oldList) {
    const k = keyOf(o);
    if (!byKey.has(k)) byKey.set(k, o);
  }
  return (v) => {
    const k = keyOf(v);
    return byKey.has(k) ? { value: byKey.get(k) } : undefined;
  };
}

function celTypeName(node: Node, value: unknown): string {
  if (node.type !== '') return node.type;
  if (Array.isArray(value)) return 'array';
  if (isObject(value)) return 'object';
  return typeof value === 'number' ? (Number.isInteger(value) ? 'integer' : 'number') : typeof value;
}

function evaluate(
  rule: Rule,
  node: Node,
  value: unknown,
  self: CelInput,
  oldSelf: CelInput | undefined,
  path: string,
): SchemaCause | undefined {
  const bindings = oldSelf === undefined ? { self } : { self, oldSelf };
  const field = rule.fieldPath === undefined ? path : appendFieldPath(path, rule.fieldPath);
  const shown = celTypeName(node, value);
  const r = rule.program.run(bindings);
  if (!r.ok) return invalid(field, shown, `${r.error} evaluating rule: ${rule.rule}`);
  if (r.value === true) return undefined;
  if (r.value !== false) return invalid(field, shown, `rule did not evaluate to a bool: ${rule.rule}`);
  let msg = rule.message ?? `failed rule: ${rule.rule}`;
  if (rule.messageExpression !== undefined) {
    const m = rule.messageExpression.run(bindings);
    if (m.ok && typeof m.value === 'string' && m.value.trim() !== '' && !/[\r\n]/.test(m.value)) msg = m.value.slice(0, 5000);
  }
  switch (rule.reason) {
    case 'FieldValueForbidden':
      return { reason: rule.reason, field, message: `Forbidden: ${msg}` };
    case 'FieldValueRequired':
      return { reason: rule.reason, field, message: `Required value: ${msg}` };
    case 'FieldValueDuplicate':
      return { reason: rule.reason, field, message: `Duplicate value: ${renderValue(shown)}: ${msg}` };
    default:
      return invalid(field, shown, msg);
  }
}

/** JSON -> CEL input guided by the schema: integer -> int (bigint), number -> double, object -> map. */
export function toCel(node: Node | undefined, v: unknown, depth: number, cache: WeakMap<object, CelInput>): CelInput {
  if (v === null || v === undefined || depth > MAX_VALUE_DEPTH) return null;
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      if (node?.type === 'number' || !Number.isInteger(v)) return v;
      return BigInt(v);
    case 'object':
      break;
    default:
      return null;
  }
  const hit = cache.get(v);
  if (hit !== undefined) return hit;
  let out: CelInput;
  if (Array.isArray(v)) {
    out = v.map((x: unknown) => toCel(node?.items, x, depth + 1, cache));
  } else {
    const m = new Map<string, CelInput>();
    const ap = node?.additionalProperties;
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      const p = node?.properties?.get(k);
      if (p !== undefined) {
        const name = escapeProperty(k);
        if (name !== undefined) m.set(name, toCel(p, x, depth + 1, cache));
      } else if (isNode(ap)) m.set(k, toCel(ap, x, depth + 1, cache));
      else m.set(k, toCel(undefined, x, depth + 1, cache));
    }
    out = m;
  }
  cache.set(v, out);
  return out;
}
