/**
 * @kars/kube-schema: what kube-apiserver does with a CRD version's openAPIV3Schema to a custom
 * resource: pruning, defaulting, schema validation and x-kubernetes-validations (CEL). Pure, no I/O.
 */
import { SchemaError, invalid, isBlocking, type SchemaCause } from './causes.js';
import { defaultValue } from './defaults.js';
import { deepCopy, findTooDeep, jsonEqual } from './json.js';
import { child, key } from './path.js';
import { pruneValue } from './prune.js';
import { readsOldSelfBelow, validateRules } from './rules.js';
import { MAX_VALUE_DEPTH, compileStructural, isNode, type Node } from './structural.js';
import { validateValue } from './validate.js';

export { SchemaError, type SchemaCause, type CauseReason } from './causes.js';

export interface CompiledSchema {
  /**
   * Remove fields not declared in the schema. Mutates and returns obj. Never touches top-level
   * apiVersion/kind/metadata (nor those of embedded resources). When `unknownFields` is given, the
   * path of every removed field is appended to it (`spec.items[0].bogus`), in document order.
   */
  prune(obj: Record<string, unknown>, unknownFields?: string[]): Record<string, unknown>;
  /** Apply `default` values as kube-apiserver does. Mutates and returns obj. */
  applyDefaults(obj: Record<string, unknown>): Record<string, unknown>;
  /** Schema validation, then x-kubernetes-validations rules. [] when valid. Never throws. */
  validate(obj: Record<string, unknown>, old?: Record<string, unknown>): SchemaCause[];
}

const BLOCKED = 'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation';

class Compiled implements CompiledSchema {
  constructor(private readonly root: Node) {}

  prune(obj: Record<string, unknown>, unknownFields?: string[]): Record<string, unknown> {
    try {
      pruneValue(this.root, obj, true, 0, unknownFields);
    } catch {
      // Pruning is best effort on hostile input; validation reports what is left.
    }
    return obj;
  }

  applyDefaults(obj: Record<string, unknown>): Record<string, unknown> {
    try {
      defaultValue(this.root, obj, true);
    } catch {
      // Same as prune: never throw.
    }
    return obj;
  }

  validate(obj: Record<string, unknown>, old?: Record<string, unknown>): SchemaCause[] {
    const out: SchemaCause[] = [];
    try {
      const deep = findTooDeep(obj, MAX_VALUE_DEPTH);
      if (deep !== undefined) return [invalid(deep, 'object', `nesting exceeds the maximum depth of ${MAX_VALUE_DEPTH}`)];
      const skip = old === undefined ? undefined : unchangedChildren(this.root, obj, old);
      validateValue(this.root, obj, '', out, true, 0, skip);
      if (out.some(isBlocking)) {
        out.push(invalid('', null, BLOCKED));
        return out;
      }
      validateRules(this.root, obj, old === undefined ? undefined : { value: old }, out, skip);
    } catch (e) {
      out.push(invalid('', null, `internal validation error: ${e instanceof Error ? e.message : String(e)}`));
    }
    return out;
  }
}

/**
 * Validation ratcheting (kube's CRDValidationRatcheting, on by default since 1.30, GA in 1.33): on
 * an update, errors in a value the update left unchanged are not reported. Here that is applied to
 * the root's children (`spec`, `status`, …; never metadata, apiVersion or kind): one deep-equal to
 * its old value, with no rule at or below it reading oldSelf, is not validated again. A status
 * write or a metadata-only patch thus does not re-validate an unchanged spec. Rules on the root
 * itself still see the whole object.
 */
function unchangedChildren(root: Node, obj: Record<string, unknown>, old: Record<string, unknown>): Set<string> | undefined {
  let out: Set<string> | undefined;
  for (const k of Object.keys(obj)) {
    if (k === 'metadata' || k === 'apiVersion' || k === 'kind' || !Object.hasOwn(old, k)) continue;
    const node = root.properties?.get(k) ?? (isNode(root.additionalProperties) ? root.additionalProperties : undefined);
    if (node !== undefined && readsOldSelfBelow(node)) continue;
    if (jsonEqual(obj[k], old[k])) (out ??= new Set()).add(k);
  }
  return out;
}

/**
 * Compile a CRD version's openAPIV3Schema once; throws SchemaError when kube-apiserver would reject it.
 * SchemaError cause fields are relative to openAPIV3Schema ("properties[spec].type", "" for the root).
 */
export function compileSchema(openAPIV3Schema: unknown): CompiledSchema {
  const { root, errors } = compileStructural(openAPIV3Schema);
  if (errors.length > 0) throw new SchemaError(errors);
  const compiled = new Compiled(root);
  const defaultErrors = checkDefaults(root, '');
  if (defaultErrors.length > 0) throw new SchemaError(defaultErrors);
  return compiled;
}

/** Defaults must be pruned already and valid against their own schema (kube checks this at CRD creation). */
function checkDefaults(node: Node, path: string, depth = 0): SchemaCause[] {
  const out: SchemaCause[] = [];
  if (depth > 100) return out;
  if (node.hasDefault) {
    const pruned = deepCopy(node.default);
    const wrapper = { v: pruned };
    pruneValue(
      { ...node, type: 'object', properties: new Map([['v', node]]), additionalProperties: undefined, preserveUnknown: false },
      wrapper,
      false,
    );
    if (JSON.stringify(wrapper.v) !== JSON.stringify(node.default))
      out.push(invalid(child(path, 'default'), node.default, 'must not have unknown fields'));
    const causes: SchemaCause[] = [];
    const value = deepCopy(node.default);
    defaultValue({ ...node, type: 'object', properties: new Map([['v', node]]), additionalProperties: undefined }, { v: value }, false);
    validateValue(node, value, '', causes, false);
    if (!causes.some(isBlocking)) validateRules(node, value, undefined, causes);
    for (const c of causes) out.push({ ...c, field: c.field === '' ? child(path, 'default') : `${child(path, 'default')}.${c.field}` });
  }
  for (const [name, p] of node.properties ?? []) out.push(...checkDefaults(p, key(child(path, 'properties'), name), depth + 1));
  if (node.items !== undefined) out.push(...checkDefaults(node.items, child(path, 'items'), depth + 1));
  if (typeof node.additionalProperties === 'object')
    out.push(...checkDefaults(node.additionalProperties, child(path, 'additionalProperties'), depth + 1));
  return out;
}

/** What {@link admit} decided about one object. */
export interface Admission {
  /** The object as kube-apiserver would store it: pruned, then defaulted. The input, mutated. */
  object: Record<string, unknown>;
  /** Schema and CEL (`x-kubernetes-validations`) failures, fields in kube's syntax; [] when valid. */
  causes: SchemaCause[];
  /**
   * Fields the schema does not declare, which pruning removed (`spec.items[0].bogus`), in document
   * order. What field validation acts on: `Strict` refuses the write naming them, `Warn` sends one
   * `unknown field "<path>"` warning each (kubectl prints them), `Ignore` drops them silently.
   */
  unknownFields: string[];
}

/**
 * Admit a custom resource as kube-apiserver does: prune (recording the unknown fields), apply
 * defaults, then validate against the schema and its CEL rules (with `old` for transition rules on
 * an update). Mutates `obj`; never throws. The one implementation used by the apiserver and by
 * `kars compile` (policy-compiler's compileDocuments), so both decide the same for the same input.
 */
export function admit(schema: CompiledSchema, obj: Record<string, unknown>, old?: Record<string, unknown>): Admission {
  const unknownFields: string[] = [];
  const object = schema.applyDefaults(schema.prune(obj, unknownFields));
  return { object, causes: schema.validate(object, old), unknownFields };
}
