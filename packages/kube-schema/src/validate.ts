/** OpenAPI schema validation with kube's extensions (int-or-string, nullable, list-type, embedded). */
import { duplicate, invalid, notSupported, required, tooLong, tooMany, typeInvalid, typeName, type SchemaCause } from './causes.js';
import { checkFormat } from './formats.js';
import { canonical, hasOwn, isObject, jsonEqual } from './json.js';
import { child, index, key } from './path.js';
import { MAX_DEPTH, isNode, type Node, type SchemaType, type ValueValidation } from './structural.js';

const RESOURCE_META = new Set(['apiVersion', 'kind', 'metadata']);

function body(path: string): string {
  return path === '' ? 'body' : `${path} in body`;
}

function matchesType(t: SchemaType, v: unknown): boolean {
  switch (t) {
    case 'object':
      return isObject(v);
    case 'array':
      return Array.isArray(v);
    case 'string':
      return typeof v === 'string';
    case 'boolean':
      return typeof v === 'boolean';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    default:
      return true;
  }
}

/** Validate a value against a structural node; appends causes to out. */
export function validateValue(
  node: Node,
  value: unknown,
  path: string,
  out: SchemaCause[],
  isRoot: boolean,
  depth = 0,
  skip?: ReadonlySet<string>,
): void {
  if (depth > MAX_DEPTH) {
    out.push(invalid(path, typeName(value), `nesting exceeds the maximum depth of ${MAX_DEPTH}`));
    return;
  }
  if (value === null) {
    if (node.nullable || (node.type === '' && !node.intOrString)) return;
    const t = node.intOrString ? 'integer,string' : node.type;
    out.push(typeInvalid(path, 'null', `${body(path)} must be of type ${t}: "null"`));
    return;
  }
  if (node.intOrString) {
    if (!(typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value)))) {
      out.push(typeInvalid(path, typeName(value), `${body(path)} must be of type integer,string: "${typeName(value)}"`));
      return;
    }
  } else if (!matchesType(node.type, value)) {
    out.push(typeInvalid(path, typeName(value), `${body(path)} must be of type ${node.type}: "${typeName(value)}"`));
    return;
  }

  checkKeywords(node.vv, value, path, out, depth, false);

  if (isObject(value)) {
    const resource = isRoot || node.embedded;
    if (node.embedded) checkEmbedded(value, path, out);
    for (const [name, p] of node.properties ?? []) {
      if (isRoot && name === 'metadata') continue;
      if (skip?.has(name) === true) continue;
      if (hasOwn(value, name)) validateValue(p, value[name], child(path, name), out, false, depth + 1);
    }
    const ap = node.additionalProperties;
    if (isNode(ap)) {
      for (const [k, v] of Object.entries(value)) {
        if (node.properties?.has(k) === true || (resource && RESOURCE_META.has(k))) continue;
        if (skip?.has(k) === true) continue;
        validateValue(ap, v, key(path, k), out, false, depth + 1);
      }
    }
    // kube-openapi's objectValidator: the properties' causes first, then the missing required ones.
    requiredCauses(node.vv, value, path, out);
  } else if (Array.isArray(value)) {
    checkListType(node, value, path, out);
    if (node.items !== undefined) {
      for (let i = 0; i < value.length; i++) validateValue(node.items, value[i], index(path, i), out, false, depth + 1);
    }
  }
}

function checkEmbedded(value: Record<string, unknown>, path: string, out: SchemaCause[]): void {
  for (const f of ['apiVersion', 'kind']) {
    const v = value[f];
    if (v === undefined || v === '' || v === null) out.push(required(child(path, f), 'must not be empty'));
    else if (typeof v !== 'string')
      out.push(typeInvalid(child(path, f), v, `${body(child(path, f))} must be of type string: "${typeName(v)}"`));
  }
  const meta = value['metadata'];
  if (meta !== undefined && meta !== null && !isObject(meta)) {
    out.push(typeInvalid(child(path, 'metadata'), meta, `${body(child(path, 'metadata'))} must be of type object: "${typeName(meta)}"`));
  }
}

function checkListType(node: Node, list: unknown[], path: string, out: SchemaCause[]): void {
  if (node.listType === 'set') {
    const seen = new Set<string>();
    list.forEach((v, i) => {
      const c = canonical(v);
      if (seen.has(c)) out.push(duplicate(index(path, i), v));
      seen.add(c);
    });
  } else if (node.listType === 'map') {
    const seen = new Set<string>();
    list.forEach((v, i) => {
      if (!isObject(v)) return;
      const keyObj: Record<string, unknown> = {};
      for (const k of node.listMapKeys) if (hasOwn(v, k)) keyObj[k] = v[k];
      const c = canonical(keyObj);
      if (seen.has(c)) out.push(duplicate(index(path, i), keyObj));
      seen.add(c);
    });
  }
}

function codePoints(s: string, stopAt: number): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) i++;
    if (++n > stopAt) return n;
  }
  return n;
}

function requiredCauses(vv: ValueValidation, value: Record<string, unknown>, path: string, out: SchemaCause[]): void {
  for (const r of vv.required) if (!hasOwn(value, r)) out.push(required(child(path, r)));
}

/**
 * Keyword checks shared by the skeleton and by allOf/anyOf/oneOf/not. `withRequired`: also an object's required
 * properties, after its properties' causes (the skeleton's caller checks them after its own properties instead).
 */
export function checkKeywords(
  vv: ValueValidation,
  value: unknown,
  path: string,
  out: SchemaCause[],
  depth: number,
  withRequired = true,
): void {
  const at = body(path);
  if (vv.type !== '' && !matchesType(vv.type, value)) {
    out.push(typeInvalid(path, typeName(value), `${at} must be of type ${vv.type}: "${typeName(value)}"`));
    return;
  }
  if (vv.enum !== undefined && !vv.enum.some((e) => jsonEqual(e, value))) out.push(notSupported(path, value, vv.enum));
  if (typeof value === 'number') {
    if (vv.maximum !== undefined) {
      if (vv.exclusiveMaximum ? value >= vv.maximum : value > vv.maximum) {
        out.push(invalid(path, value, `${at} should be less than ${vv.exclusiveMaximum ? '' : 'or equal to '}${vv.maximum}`));
      }
    }
    if (vv.minimum !== undefined) {
      if (vv.exclusiveMinimum ? value <= vv.minimum : value < vv.minimum) {
        out.push(invalid(path, value, `${at} should be greater than ${vv.exclusiveMinimum ? '' : 'or equal to '}${vv.minimum}`));
      }
    }
    if (vv.multipleOf !== undefined) {
      const q = value / vv.multipleOf;
      if (!Number.isFinite(q) || Math.abs(q - Math.round(q)) > 1e-9)
        out.push(invalid(path, value, `${at} should be a multiple of ${vv.multipleOf}`));
    }
  } else if (typeof value === 'string') {
    // kube-openapi's stringValidator stops at the first of maxLength, minLength and pattern that fails.
    if (vv.maxLength !== undefined && codePoints(value, vv.maxLength) > vv.maxLength) out.push(tooLong(path, vv.maxLength));
    else if (vv.minLength !== undefined && codePoints(value, vv.minLength) < vv.minLength)
      out.push(invalid(path, value, `${at} should be at least ${vv.minLength} chars long`));
    else if (vv.pattern !== undefined && !safeTest(vv.pattern.re, value))
      out.push(invalid(path, value, `${at} should match '${vv.pattern.source}'`));
    if (vv.format !== undefined && !checkFormat(vv.format, value))
      out.push(typeInvalid(path, value, `${at} must be of type ${vv.format}: ${JSON.stringify(value.slice(0, 256))}`));
  } else if (Array.isArray(value)) {
    if (vv.maxItems !== undefined && value.length > vv.maxItems) out.push(tooMany(path, value.length, vv.maxItems, 'items'));
    if (vv.minItems !== undefined && value.length < vv.minItems)
      out.push(invalid(path, value.length, `${at} should have at least ${vv.minItems} items`));
    if (vv.items !== undefined) value.forEach((v, i) => checkKeywords(vv.items as ValueValidation, v, index(path, i), out, depth + 1));
  } else if (isObject(value)) {
    const n = Object.keys(value).length;
    if (vv.maxProperties !== undefined && n > vv.maxProperties) out.push(tooMany(path, n, vv.maxProperties, 'properties'));
    if (vv.minProperties !== undefined && n < vv.minProperties)
      out.push(invalid(path, n, `${at} should have at least ${vv.minProperties} properties`));
    for (const [name, p] of vv.properties ?? []) {
      if (hasOwn(value, name)) checkKeywords(p, value[name], child(path, name), out, depth + 1);
    }
    if (withRequired) requiredCauses(vv, value, path, out);
  }
  if (depth > MAX_DEPTH) return;
  checkJunctors(vv, value, path, out, depth);
}

function safeTest(re: { test(s: string): boolean }, s: string): boolean {
  try {
    return re.test(s);
  } catch {
    return false;
  }
}

function sub(vv: ValueValidation, value: unknown, path: string, depth: number): SchemaCause[] {
  const out: SchemaCause[] = [];
  checkKeywords(vv, value, path, out, depth + 1);
  return out;
}

function fewest(results: SchemaCause[][]): SchemaCause[] {
  let best: SchemaCause[] | undefined;
  for (const r of results) if (best === undefined || r.length < best.length) best = r;
  return best ?? [];
}

function checkJunctors(vv: ValueValidation, value: unknown, path: string, out: SchemaCause[], depth: number): void {
  const at = body(path);
  if (vv.allOf.length > 0) {
    const failed = vv.allOf.map((s) => sub(s, value, path, depth)).filter((r) => r.length > 0);
    if (failed.length > 0) {
      out.push(invalid(path, typeName(value), `${at} must validate all the schemas (allOf)`));
      for (const r of failed) out.push(...r);
    }
  }
  if (vv.anyOf.length > 0) {
    const results = vv.anyOf.map((s) => sub(s, value, path, depth));
    if (!results.some((r) => r.length === 0)) {
      out.push(invalid(path, typeName(value), `${at} must validate at least one schema (anyOf)`));
      out.push(...fewest(results));
    }
  }
  if (vv.oneOf.length > 0) {
    const results = vv.oneOf.map((s) => sub(s, value, path, depth));
    const ok = results.filter((r) => r.length === 0).length;
    if (ok === 0) {
      out.push(invalid(path, typeName(value), `${at} must validate one and only one schema (oneOf)`));
      out.push(...fewest(results));
    } else if (ok > 1) {
      out.push(invalid(path, typeName(value), `${at} must validate one and only one schema (oneOf). Found ${ok} valid alternatives`));
    }
  }
  if (vv.not !== undefined && sub(vv.not, value, path, depth).length === 0) {
    out.push(invalid(path, typeName(value), `${at} must not validate the schema (not)`));
  }
}
