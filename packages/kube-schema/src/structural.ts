/**
 * The structural schema model and its compiler: turns a CRD version's openAPIV3Schema into a tree
 * of Nodes, rejecting what kube-apiserver rejects for v1 CRDs (non-structural schemas, forbidden
 * keywords, bad list/map extensions, CEL rules that do not compile).
 */
import { RE2JS } from '@bufbuild/re2';
import { compileCel, escapeProperty, type CelProgram, type CelShape } from './cel.js';
import { forbidden, invalid, notSupported, required, type CauseReason, type SchemaCause } from './causes.js';
import { isObject } from './json.js';
import { child, index, isValidFieldPath, key } from './path.js';

export type SchemaType = '' | 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
const TYPES: readonly SchemaType[] = ['object', 'array', 'string', 'integer', 'number', 'boolean'];

/** Keyword constraints; on the skeleton they sit in Node.vv, inside allOf/anyOf/oneOf/not they nest. */
export interface ValueValidation {
  /** Only set inside junctors (the int-or-string anyOf idiom); the skeleton's type lives on Node. */
  type: SchemaType;
  format: string | undefined;
  enum: unknown[] | undefined;
  maximum: number | undefined;
  exclusiveMaximum: boolean;
  minimum: number | undefined;
  exclusiveMinimum: boolean;
  multipleOf: number | undefined;
  maxLength: number | undefined;
  minLength: number | undefined;
  pattern: { source: string; re: RE2JS } | undefined;
  maxItems: number | undefined;
  minItems: number | undefined;
  maxProperties: number | undefined;
  minProperties: number | undefined;
  required: string[];
  allOf: ValueValidation[];
  anyOf: ValueValidation[];
  oneOf: ValueValidation[];
  not: ValueValidation | undefined;
  /** Junctor-only nesting. */
  properties: Map<string, ValueValidation> | undefined;
  items: ValueValidation | undefined;
}

export interface Rule {
  rule: string;
  program: CelProgram;
  message: string | undefined;
  messageExpression: CelProgram | undefined;
  reason: CauseReason;
  fieldPath: string | undefined;
  optionalOldSelf: boolean;
}

export type ListType = 'atomic' | 'set' | 'map';

export interface Node {
  type: SchemaType;
  nullable: boolean;
  preserveUnknown: boolean;
  embedded: boolean;
  intOrString: boolean;
  hasDefault: boolean;
  default: unknown;
  properties: Map<string, Node> | undefined;
  items: Node | undefined;
  /** A schema for map values, true (keep anything), false (no fields) or undefined. */
  additionalProperties: Node | boolean | undefined;
  listType: ListType | undefined;
  listMapKeys: string[];
  rules: Rule[];
  vv: ValueValidation;
}

/** Maximum schema nesting (and walker depth). */
export const MAX_DEPTH = 100;
/** Maximum nesting of an object's value (kube's decoder allows more; this keeps every walk bounded). */
export const MAX_VALUE_DEPTH = 1000;

const FORBIDDEN_EVERYWHERE: Record<string, string> = {
  $ref: '$ref is not supported',
  id: 'id is not supported',
  additionalItems: 'additionalItems is not supported',
  patternProperties: 'patternProperties is not supported',
  definitions: 'definitions is not supported',
  dependencies: 'dependencies is not supported',
};

/** Keys that must not appear inside allOf/anyOf/oneOf/not (structural schema rule). */
const FORBIDDEN_IN_JUNCTORS = [
  'default',
  'nullable',
  'additionalProperties',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-embedded-resource',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
];

const RULE_REASONS: readonly CauseReason[] = ['FieldValueInvalid', 'FieldValueForbidden', 'FieldValueRequired', 'FieldValueDuplicate'];

interface Ctx {
  errors: SchemaCause[];
}

/** Compile the root schema; returns the tree and every problem found (empty when acceptable). Cause fields are relative to openAPIV3Schema ("properties[spec].type"). */
export function compileStructural(raw: unknown): { root: Node; errors: SchemaCause[] } {
  const ctx: Ctx = { errors: [] };
  const path = '';
  if (!isObject(raw)) {
    ctx.errors.push(required(path, 'openAPIV3Schema must be an object schema'));
    return { root: emptyNode(), errors: ctx.errors };
  }
  const root = compileNode(raw, path, ctx, 0, { isRoot: true, inResourceMeta: false });
  if (root.type !== 'object') ctx.errors.push(invalid(child(path, 'type'), raw['type'] ?? '', 'must be object at the root'));
  if (root.nullable) ctx.errors.push(forbidden(child(path, 'nullable'), 'must be false at the root'));
  if (root.hasDefault) ctx.errors.push(forbidden(child(path, 'default'), 'must not be set at the root'));
  return { root, errors: ctx.errors };
}

export function emptyNode(): Node {
  return {
    type: '',
    nullable: false,
    preserveUnknown: true,
    embedded: false,
    intOrString: false,
    hasDefault: false,
    default: undefined,
    properties: undefined,
    items: undefined,
    additionalProperties: undefined,
    listType: undefined,
    listMapKeys: [],
    rules: [],
    vv: emptyVV(),
  };
}

function emptyVV(): ValueValidation {
  return {
    type: '',
    format: undefined,
    enum: undefined,
    maximum: undefined,
    exclusiveMaximum: false,
    minimum: undefined,
    exclusiveMinimum: false,
    multipleOf: undefined,
    maxLength: undefined,
    minLength: undefined,
    pattern: undefined,
    maxItems: undefined,
    minItems: undefined,
    maxProperties: undefined,
    minProperties: undefined,
    required: [],
    allOf: [],
    anyOf: [],
    oneOf: [],
    not: undefined,
    properties: undefined,
    items: undefined,
  };
}

interface Where {
  isRoot: boolean;
  inResourceMeta: boolean;
}

function compileNode(raw: Record<string, unknown>, path: string, ctx: Ctx, depth: number, where: Where): Node {
  const node = emptyNode();
  node.preserveUnknown = false;
  if (depth > MAX_DEPTH) {
    ctx.errors.push(forbidden(path, `schema nesting exceeds ${MAX_DEPTH} levels`));
    return node;
  }
  forbidUnsupported(raw, path, ctx);

  const t = raw['type'];
  if (t !== undefined) {
    if (t === 'null') ctx.errors.push(forbidden(child(path, 'type'), 'type cannot be set to null, use nullable as an alternative'));
    else if (typeof t !== 'string' || !(TYPES as readonly string[]).includes(t))
      ctx.errors.push(notSupported(child(path, 'type'), t, TYPES));
    else node.type = t as SchemaType;
  }
  node.nullable = flag(raw, 'nullable', path, ctx);
  node.intOrString = flag(raw, 'x-kubernetes-int-or-string', path, ctx);
  node.embedded = flag(raw, 'x-kubernetes-embedded-resource', path, ctx);
  const pu = raw['x-kubernetes-preserve-unknown-fields'];
  if (pu === false) ctx.errors.push(invalid(child(path, 'x-kubernetes-preserve-unknown-fields'), false, 'must be true or undefined'));
  node.preserveUnknown = flag(raw, 'x-kubernetes-preserve-unknown-fields', path, ctx);

  if (node.intOrString && node.type !== '')
    ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be empty if x-kubernetes-int-or-string is true'));
  if (node.type === '' && !node.intOrString && !node.preserveUnknown) {
    ctx.errors.push(required(child(path, 'type'), 'must not be empty for specified object fields'));
  }
  if (node.embedded) {
    if (node.type !== 'object')
      ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be object if x-kubernetes-embedded-resource is true'));
    if (where.inResourceMeta)
      ctx.errors.push(forbidden(child(path, 'x-kubernetes-embedded-resource'), 'must not be used inside of resource meta'));
  }

  // properties / additionalProperties
  const props = raw['properties'];
  if (props !== undefined) {
    if (!isObject(props)) ctx.errors.push(invalid(child(path, 'properties'), props, 'must be an object'));
    else {
      node.properties = new Map();
      const isResource = where.isRoot || node.embedded;
      for (const [name, sub] of Object.entries(props)) {
        const p = key(child(path, 'properties'), name);
        if (!isObject(sub)) {
          ctx.errors.push(invalid(p, sub, 'must be a schema object'));
          continue;
        }
        const meta = isResource && (name === 'metadata' || name === 'apiVersion' || name === 'kind');
        if (meta && where.isRoot && 'default' in sub)
          ctx.errors.push(forbidden(child(p, 'default'), `must not be set in top-level ${name}`));
        node.properties.set(
          name,
          compileNode(sub, p, ctx, depth + 1, { isRoot: false, inResourceMeta: where.inResourceMeta || (meta && name === 'metadata') }),
        );
      }
      if (where.isRoot)
        checkRootMetadata(node.properties.get('metadata'), props['metadata'], key(child(path, 'properties'), 'metadata'), ctx);
    }
  }
  const ap = raw['additionalProperties'];
  if (ap !== undefined) {
    const p = child(path, 'additionalProperties');
    if (typeof ap === 'boolean') node.additionalProperties = ap;
    else if (isObject(ap))
      node.additionalProperties = compileNode(ap, p, ctx, depth + 1, { isRoot: false, inResourceMeta: where.inResourceMeta });
    else ctx.errors.push(invalid(p, ap, 'must be a boolean or a schema object'));
    if (node.properties !== undefined && node.properties.size > 0 && node.additionalProperties !== true) {
      ctx.errors.push(forbidden(p, 'additionalProperties and properties are mutual exclusive'));
    }
    if (where.isRoot || node.embedded) ctx.errors.push(forbidden(p, 'must not be used at the root of a resource'));
    if (node.type !== 'object' && node.type !== '')
      ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be object if additionalProperties is specified'));
  }
  if (node.properties !== undefined && node.type !== 'object' && !(node.type === '' && node.preserveUnknown)) {
    ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be object if properties are specified'));
  }

  // items
  const items = raw['items'];
  if (items !== undefined) {
    const p = child(path, 'items');
    if (Array.isArray(items)) ctx.errors.push(forbidden(p, 'items must be a schema object and not an array'));
    else if (!isObject(items)) ctx.errors.push(invalid(p, items, 'must be a schema object'));
    else node.items = compileNode(items, p, ctx, depth + 1, { isRoot: false, inResourceMeta: where.inResourceMeta });
    if (node.type !== 'array') ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be array if items are specified'));
  } else if (node.type === 'array') {
    ctx.errors.push(required(child(path, 'items'), 'must be specified'));
  }
  if (node.embedded && node.properties === undefined && !node.preserveUnknown) {
    ctx.errors.push(
      required(
        child(path, 'properties'),
        'must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields',
      ),
    );
  }

  if ('default' in raw) {
    node.hasDefault = true;
    node.default = raw['default'];
    if (where.inResourceMeta) ctx.errors.push(forbidden(child(path, 'default'), 'must not be set inside of resource meta'));
  }

  compileExtensions(raw, node, path, ctx);
  node.vv = compileVV(raw, path, ctx, depth, false);
  checkJunctorsHaveCounterparts(node, node.vv, path, ctx);
  node.rules = compileRules(raw['x-kubernetes-validations'], child(path, 'x-kubernetes-validations'), ctx, node, where.isRoot);
  return node;
}

function flag(raw: Record<string, unknown>, name: string, path: string, ctx: Ctx): boolean {
  const v = raw[name];
  if (v === undefined) return false;
  if (typeof v !== 'boolean') {
    ctx.errors.push(invalid(child(path, name), v, 'must be a boolean'));
    return false;
  }
  return v;
}

function forbidUnsupported(raw: Record<string, unknown>, path: string, ctx: Ctx): void {
  for (const [k, msg] of Object.entries(FORBIDDEN_EVERYWHERE)) {
    if (raw[k] !== undefined) ctx.errors.push(forbidden(child(path, k), msg));
  }
  if (raw['uniqueItems'] === true)
    ctx.errors.push(
      forbidden(child(path, 'uniqueItems'), 'uniqueItems cannot be set to true since the runtime complexity becomes quadratic'),
    );
}

/**
 * Top-level metadata may only restrict name and generateName (as strings), and say nothing else
 * but `type`: not even a description, since the server supplies ObjectMeta's own schema. (A
 * description there was refused by a real kube-apiserver and accepted here, issue 18.)
 */
function checkRootMetadata(node: Node | undefined, raw: unknown, path: string, ctx: Ctx): void {
  if (node === undefined || !isObject(raw)) return;
  if (Object.keys(raw).some((k) => k !== 'type' && k !== 'properties'))
    ctx.errors.push(forbidden(path, 'must not specify anything other than name and generateName, but metadata is implicitly specified'));
  if (node.type !== 'object') ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be object'));
  if (node.properties === undefined) return;
  for (const [name, sub] of node.properties) {
    if (name !== 'name' && name !== 'generateName')
      ctx.errors.push(
        forbidden(
          key(child(path, 'properties'), name),
          'must not be specified; only metadata.name and metadata.generateName may be restricted',
        ),
      );
    else if (sub.type !== 'string')
      ctx.errors.push(invalid(child(key(child(path, 'properties'), name), 'type'), sub.type, 'must be string'));
  }
}

function compileExtensions(raw: Record<string, unknown>, node: Node, path: string, ctx: Ctx): void {
  const lt = raw['x-kubernetes-list-type'];
  if (lt !== undefined) {
    const p = child(path, 'x-kubernetes-list-type');
    if (lt !== 'atomic' && lt !== 'set' && lt !== 'map') ctx.errors.push(notSupported(p, lt, ['atomic', 'set', 'map']));
    else node.listType = lt;
    if (node.type !== 'array')
      ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be array if x-kubernetes-list-type is specified'));
  }
  const keys = raw['x-kubernetes-list-map-keys'];
  if (keys !== undefined) {
    const p = child(path, 'x-kubernetes-list-map-keys');
    if (!Array.isArray(keys) || !keys.every((k): k is string => typeof k === 'string'))
      ctx.errors.push(invalid(p, keys, 'must be a list of strings'));
    else node.listMapKeys = keys;
    if (node.listMapKeys.length > 0 && node.listType !== 'map')
      ctx.errors.push(invalid(child(path, 'x-kubernetes-list-type'), lt ?? null, 'must be map if x-kubernetes-list-map-keys is non-empty'));
    if (new Set(node.listMapKeys).size !== node.listMapKeys.length) ctx.errors.push(invalid(p, keys, 'must not contain duplicate entries'));
  }
  const mt = raw['x-kubernetes-map-type'];
  if (mt !== undefined) {
    if (mt !== 'atomic' && mt !== 'granular')
      ctx.errors.push(notSupported(child(path, 'x-kubernetes-map-type'), mt, ['atomic', 'granular']));
    if (node.type !== 'object')
      ctx.errors.push(invalid(child(path, 'type'), node.type, 'must be object if x-kubernetes-map-type is specified'));
  }
  const items = node.items;
  if ((node.listType === 'set' || node.listType === 'map') && items?.nullable === true) {
    ctx.errors.push(
      forbidden(child(child(path, 'items'), 'nullable'), `cannot be nullable when x-kubernetes-list-type is ${node.listType}`),
    );
  }
  if (node.listType === 'map') {
    if (node.listMapKeys.length === 0)
      ctx.errors.push(required(child(path, 'x-kubernetes-list-map-keys'), 'must not be empty if x-kubernetes-list-type is map'));
    if (items !== undefined && items.type !== 'object')
      ctx.errors.push(
        invalid(child(child(path, 'items'), 'type'), items.type, "must be object if parent array's x-kubernetes-list-type is map"),
      );
    if (items?.type === 'object') {
      const req = new Set(items.vv.required);
      for (const k of node.listMapKeys) {
        const kp = key(child(child(path, 'items'), 'properties'), k);
        const prop = items.properties?.get(k);
        if (prop === undefined) {
          ctx.errors.push(
            invalid(child(path, 'x-kubernetes-list-map-keys'), node.listMapKeys, 'entries must all be names of item properties'),
          );
          continue;
        }
        if (prop.type === 'array' || prop.type === 'object')
          ctx.errors.push(invalid(child(kp, 'type'), prop.type, "must be a scalar type if parent array's x-kubernetes-list-type is map"));
        if (!req.has(k) && !prop.hasDefault)
          ctx.errors.push(
            required(
              child(kp, 'default'),
              'this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property',
            ),
          );
        if (prop.nullable)
          ctx.errors.push(forbidden(child(kp, 'nullable'), 'this property is in x-kubernetes-list-map-keys, so it cannot be nullable'));
      }
    }
  }
}

function num(raw: Record<string, unknown>, name: string, path: string, ctx: Ctx, integer: boolean): number | undefined {
  const v = raw[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || (integer && (!Number.isInteger(v) || v < 0))) {
    ctx.errors.push(invalid(child(path, name), v, integer ? 'must be a non-negative integer' : 'must be a number'));
    return undefined;
  }
  return v;
}

function compileVV(raw: Record<string, unknown>, path: string, ctx: Ctx, depth: number, inJunctor: boolean): ValueValidation {
  const vv = emptyVV();
  if (depth > MAX_DEPTH) {
    ctx.errors.push(forbidden(path, `schema nesting exceeds ${MAX_DEPTH} levels`));
    return vv;
  }
  if (inJunctor) {
    forbidUnsupported(raw, path, ctx);
    for (const k of FORBIDDEN_IN_JUNCTORS) {
      if (raw[k] !== undefined)
        ctx.errors.push(forbidden(child(path, k), 'must not be used inside of value validations (allOf, anyOf, oneOf, not)'));
    }
    const t = raw['type'];
    if (t !== undefined) {
      if (typeof t === 'string' && (TYPES as readonly string[]).includes(t)) vv.type = t as SchemaType;
      else ctx.errors.push(notSupported(child(path, 'type'), t, TYPES));
    }
  }
  if (raw['format'] !== undefined) {
    if (typeof raw['format'] === 'string') vv.format = raw['format'];
    else ctx.errors.push(invalid(child(path, 'format'), raw['format'], 'must be a string'));
  }
  if (raw['enum'] !== undefined) {
    if (Array.isArray(raw['enum'])) vv.enum = raw['enum'];
    else ctx.errors.push(invalid(child(path, 'enum'), raw['enum'], 'must be a list'));
  }
  vv.maximum = num(raw, 'maximum', path, ctx, false);
  vv.minimum = num(raw, 'minimum', path, ctx, false);
  vv.exclusiveMaximum = raw['exclusiveMaximum'] === true;
  vv.exclusiveMinimum = raw['exclusiveMinimum'] === true;
  vv.multipleOf = num(raw, 'multipleOf', path, ctx, false);
  if (vv.multipleOf !== undefined && vv.multipleOf <= 0) {
    ctx.errors.push(invalid(child(path, 'multipleOf'), vv.multipleOf, 'must be greater than zero'));
    vv.multipleOf = undefined;
  }
  vv.maxLength = num(raw, 'maxLength', path, ctx, true);
  vv.minLength = num(raw, 'minLength', path, ctx, true);
  vv.maxItems = num(raw, 'maxItems', path, ctx, true);
  vv.minItems = num(raw, 'minItems', path, ctx, true);
  vv.maxProperties = num(raw, 'maxProperties', path, ctx, true);
  vv.minProperties = num(raw, 'minProperties', path, ctx, true);
  const pattern = raw['pattern'];
  if (pattern !== undefined) {
    if (typeof pattern !== 'string') ctx.errors.push(invalid(child(path, 'pattern'), pattern, 'must be a string'));
    else {
      try {
        vv.pattern = { source: pattern, re: RE2JS.compile(pattern) };
      } catch {
        ctx.errors.push(invalid(child(path, 'pattern'), pattern, 'must be a valid regular expression'));
      }
    }
  }
  const req = raw['required'];
  if (req !== undefined) {
    if (Array.isArray(req) && req.every((r): r is string => typeof r === 'string')) vv.required = req;
    else ctx.errors.push(invalid(child(path, 'required'), req, 'must be a list of strings'));
  }
  for (const j of ['allOf', 'anyOf', 'oneOf'] as const) {
    const list = raw[j];
    if (list === undefined) continue;
    if (!Array.isArray(list)) {
      ctx.errors.push(invalid(child(path, j), list, 'must be a list of schemas'));
      continue;
    }
    list.forEach((s: unknown, i) => {
      const p = index(child(path, j), i);
      if (isObject(s)) vv[j].push(compileVV(s, p, ctx, depth + 1, true));
      else ctx.errors.push(invalid(p, s, 'must be a schema object'));
    });
  }
  const not = raw['not'];
  if (not !== undefined) {
    if (isObject(not)) vv.not = compileVV(not, child(path, 'not'), ctx, depth + 1, true);
    else ctx.errors.push(invalid(child(path, 'not'), not, 'must be a schema object'));
  }
  if (inJunctor) {
    const props = raw['properties'];
    if (isObject(props)) {
      vv.properties = new Map();
      for (const [name, sub] of Object.entries(props)) {
        if (isObject(sub)) vv.properties.set(name, compileVV(sub, key(child(path, 'properties'), name), ctx, depth + 1, true));
      }
    }
    const items = raw['items'];
    if (isObject(items)) vv.items = compileVV(items, child(path, 'items'), ctx, depth + 1, true);
  }
  return vv;
}

/** Structural rule: whatever a junctor constrains must exist in the skeleton at the same place. */
function checkJunctorsHaveCounterparts(node: Node, vv: ValueValidation, path: string, ctx: Ctx): void {
  const subs: [ValueValidation, string][] = [];
  vv.allOf.forEach((s, i) => subs.push([s, index(child(path, 'allOf'), i)]));
  vv.anyOf.forEach((s, i) => subs.push([s, index(child(path, 'anyOf'), i)]));
  vv.oneOf.forEach((s, i) => subs.push([s, index(child(path, 'oneOf'), i)]));
  if (vv.not !== undefined) subs.push([vv.not, child(path, 'not')]);
  for (const [s, p] of subs) {
    if (s.type !== '' && !node.intOrString)
      ctx.errors.push(forbidden(child(p, 'type'), 'must not be used inside of value validations (allOf, anyOf, oneOf, not)'));
    for (const [name, sp] of s.properties ?? []) {
      const counterpart = node.properties?.get(name) ?? (isNode(node.additionalProperties) ? node.additionalProperties : undefined);
      if (counterpart === undefined) {
        if (!node.preserveUnknown)
          ctx.errors.push(forbidden(key(child(p, 'properties'), name), 'must have a corresponding property in the structural schema'));
      } else checkJunctorsHaveCounterparts(counterpart, { ...emptyVV(), allOf: [sp] }, key(child(p, 'properties'), name), ctx);
    }
    if (s.items !== undefined) {
      if (node.items === undefined)
        ctx.errors.push(forbidden(child(p, 'items'), 'must have a corresponding items schema in the structural schema'));
      else checkJunctorsHaveCounterparts(node.items, { ...emptyVV(), allOf: [s.items] }, child(p, 'items'), ctx);
    }
    checkJunctorsHaveCounterparts(node, { ...s, properties: undefined, items: undefined }, p, ctx);
  }
}

export function isNode(v: Node | boolean | undefined): v is Node {
  return typeof v === 'object';
}

function compileRules(raw: unknown, path: string, ctx: Ctx, node: Node, isRoot: boolean): Rule[] {
  if (raw === undefined) return [];
  const self = celShapeOf(node, isRoot);
  if (!Array.isArray(raw)) {
    ctx.errors.push(invalid(path, raw, 'must be a list of rules'));
    return [];
  }
  const rules: Rule[] = [];
  raw.forEach((r: unknown, i) => {
    const p = index(path, i);
    if (!isObject(r)) {
      ctx.errors.push(invalid(p, r, 'must be an object'));
      return;
    }
    const text = r['rule'];
    if (typeof text !== 'string' || text.trim() === '') {
      ctx.errors.push(required(child(p, 'rule'), ''));
      return;
    }
    const program = compileCel(text, true, self);
    if (typeof program === 'string') {
      ctx.errors.push(invalid(child(p, 'rule'), text, program));
      return;
    }
    const rule: Rule = {
      rule: text,
      program,
      message: undefined,
      messageExpression: undefined,
      reason: 'FieldValueInvalid',
      fieldPath: undefined,
      optionalOldSelf: false,
    };
    const msg = r['message'];
    if (msg !== undefined) {
      if (typeof msg !== 'string' || msg.trim() === '')
        ctx.errors.push(invalid(child(p, 'message'), msg, 'message must be non-empty if specified'));
      else if (/[\r\n]/.test(msg)) ctx.errors.push(invalid(child(p, 'message'), msg, 'message must not contain line breaks'));
      else rule.message = msg;
    }
    const me = r['messageExpression'];
    if (me !== undefined) {
      if (typeof me !== 'string' || me.trim() === '')
        ctx.errors.push(required(child(p, 'messageExpression'), 'messageExpression must be non-empty if specified'));
      else {
        const mp = compileCel(me, true, self);
        if (typeof mp === 'string') ctx.errors.push(invalid(child(p, 'messageExpression'), me, `messageExpression ${mp}`));
        else rule.messageExpression = mp;
      }
    }
    const reason = r['reason'];
    if (reason !== undefined) {
      if (typeof reason === 'string' && (RULE_REASONS as readonly string[]).includes(reason)) rule.reason = reason as CauseReason;
      else ctx.errors.push(notSupported(child(p, 'reason'), reason, RULE_REASONS));
    }
    const fp = r['fieldPath'];
    if (fp !== undefined) {
      if (typeof fp !== 'string' || !isValidFieldPath(fp))
        ctx.errors.push(invalid(child(p, 'fieldPath'), fp, "fieldPath must be a valid relative path such as .foo.bar or ['key']"));
      else if (fieldPathTarget(node, fp) === undefined)
        ctx.errors.push(invalid(child(p, 'fieldPath'), fp, 'fieldPath must refer to a field in the schema'));
      else rule.fieldPath = fp;
    }
    const oos = r['optionalOldSelf'];
    if (oos !== undefined) {
      if (typeof oos !== 'boolean') ctx.errors.push(invalid(child(p, 'optionalOldSelf'), oos, 'must be a boolean'));
      else if (oos && !program.usesOldSelf)
        ctx.errors.push(invalid(child(p, 'optionalOldSelf'), oos, 'may not be set if rule does not use oldSelf'));
      else rule.optionalOldSelf = oos;
    }
    rules.push(rule);
  });
  return rules;
}

const UNTYPED: CelShape = {};

/**
 * The CEL type of a node's values, as far as the compile-time field check needs it (kube's
 * SchemaDeclType): an object with declared properties has exactly those fields (the root also
 * apiVersion, kind and metadata); maps, preserve-unknown-fields objects and embedded resources
 * are left open (no field is refused there); a list has its items' shape.
 */
function celShapeOf(node: Node, isRoot = false): CelShape {
  if (node.type === 'array') return node.items ? { items: () => celShapeOf(node.items!) } : UNTYPED;
  if (node.type !== 'object' || node.properties === undefined || node.preserveUnknown || node.embedded) return UNTYPED;
  if (node.additionalProperties !== undefined && node.additionalProperties !== false) return UNTYPED;
  const fields = new Map<string, () => CelShape>();
  if (isRoot) for (const name of ['apiVersion', 'kind', 'metadata']) fields.set(name, () => UNTYPED);
  for (const [name, sub] of node.properties) {
    const celName = escapeProperty(name);
    if (celName !== undefined) fields.set(celName, () => celShapeOf(sub));
  }
  return { fields };
}

/** Resolve a fieldPath against a node's schema; undefined when it names nothing declared. */
function fieldPathTarget(node: Node, fp: string): Node | undefined {
  const re = /\.([^.[\]]+)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*(\d+)\s*\]/gy;
  let cur: Node | undefined = node;
  let m: RegExpExecArray | null;
  while (cur !== undefined && (m = re.exec(fp)) !== null) {
    if (cur.preserveUnknown && cur.properties === undefined) return cur;
    if (m[4] !== undefined) cur = cur.items;
    else {
      const name = m[1] ?? m[2] ?? m[3] ?? '';
      const ap: Node | boolean | undefined = cur.additionalProperties;
      cur = cur.properties?.get(name) ?? (isNode(ap) ? ap : undefined);
    }
  }
  return cur;
}
