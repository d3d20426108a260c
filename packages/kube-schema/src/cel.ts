/**
 * CEL for x-kubernetes-validations: one shared environment, compile-time checks of identifiers
 * and function names, JSON -> CEL value conversion and guarded evaluation.
 */
import { CelScalar, celEnv, celMethod, isCelError, listType, parse, plan } from '@bufbuild/cel';
import type { CelInput, CelValue } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';

type ParsedExpr = ReturnType<typeof parse>;
type Expr = ParsedExpr['expr'];

const { BOOL, DYN } = CelScalar;

function ordered(list: Iterable<CelValue>): CelValue[] {
  const out = [...list];
  for (const v of out) {
    if (typeof v !== 'bigint' && typeof v !== 'number' && typeof v !== 'string') throw new Error('list elements are not comparable');
  }
  return out;
}

function less(a: CelValue, b: CelValue): boolean {
  if (typeof a === 'string' && typeof b === 'string') return a < b;
  if ((typeof a === 'bigint' || typeof a === 'number') && (typeof b === 'bigint' || typeof b === 'number')) return a < b;
  throw new Error('list elements are not comparable');
}

/** The Kubernetes CEL list library subset: isSorted, sum, min, max. */
const listFuncs = [
  celMethod('isSorted', listType(DYN), [], BOOL, function (): boolean {
    const a = ordered(this);
    for (let i = 1; i < a.length; i++) if (less(a[i] as CelValue, a[i - 1] as CelValue)) return false;
    return true;
  }),
  celMethod('sum', listType(DYN), [], DYN, function (): CelInput {
    const a = ordered(this);
    if (a.length === 0) return 0n;
    if (a.every((x) => typeof x === 'bigint')) return (a as bigint[]).reduce((s, x) => s + x, 0n);
    if (a.every((x) => typeof x === 'number')) return (a as number[]).reduce((s, x) => s + x, 0);
    throw new Error('sum requires a list of ints or a list of doubles');
  }),
  celMethod('min', listType(DYN), [], DYN, function (): CelInput {
    const a = ordered(this);
    if (a.length === 0) throw new Error('min called on an empty list');
    return a.reduce((m, x) => (less(x, m) ? x : m)) as CelInput;
  }),
  celMethod('max', listType(DYN), [], DYN, function (): CelInput {
    const a = ordered(this);
    if (a.length === 0) throw new Error('max called on an empty list');
    return a.reduce((m, x) => (less(m, x) ? x : m)) as CelInput;
  }),
];

const env = celEnv({ funcs: [...strings, ...listFuncs] });

/** Call names the planner handles itself rather than through the function resolver. */
const SPECIAL_CALLS = new Set(['_&&_', '_||_', '_?_:_', '_[_]', '_[?_]', '_?._', '@not_strictly_false', '__not_strictly_false__']);
const KNOWN_FUNCS = new Set<string>([...env.funcs].map((f) => f.name));

/** Type denotations are identifiers in CEL (`type(x) == int`). */
const TYPE_IDENTS = ['int', 'uint', 'double', 'bool', 'string', 'bytes', 'list', 'map', 'null_type', 'type', 'dyn'];

export interface CelProgram {
  readonly source: string;
  readonly usesOldSelf: boolean;
  /** Evaluate; never throws. */
  run(bindings: { self: CelInput; oldSelf?: CelInput }): { ok: true; value: CelValue } | { ok: false; error: string };
}

/**
 * What the compile-time check knows of a value's type, as kube's type checker derives it from the
 * schema: `fields`, the CEL names of an object's declared properties (absent: any field may be
 * selected — maps, preserve-unknown-fields, embedded resources, untyped values), and a list's `items`.
 * Getters, so a deep schema is only walked as far as a rule selects.
 */
export interface CelShape {
  readonly fields?: ReadonlyMap<string, () => CelShape>;
  readonly items?: () => CelShape;
}

/**
 * Compile an expression over `self` (and `oldSelf` when allowOldSelf), both of shape `self` when
 * given: selecting a field an object's schema does not declare is kube's `undefined field 'x'`.
 * Returns an error string on failure.
 */
export function compileCel(source: string, allowOldSelf: boolean, self: CelShape = {}): CelProgram | string {
  let parsed: ParsedExpr;
  try {
    parsed = parse(source);
  } catch (e) {
    return `compilation failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  const refs = { oldSelf: false, errors: [] as string[] };
  const scope: Scope = new Map<string, CelShape | undefined>(TYPE_IDENTS.map((t) => [t, undefined]));
  scope.set('self', self);
  if (allowOldSelf) scope.set('oldSelf', self);
  checkExpr(parsed.expr, scope, refs, 0);
  if (refs.errors.length > 0) return `compilation failed: ${refs.errors.join('; ')}`;
  let fn: ReturnType<typeof plan>;
  try {
    fn = plan(env, parsed);
  } catch (e) {
    return `compilation failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  return {
    source,
    usesOldSelf: refs.oldSelf,
    run(bindings) {
      try {
        const r = fn(bindings as Record<string, CelInput>);
        if (isCelError(r)) return { ok: false, error: r.message };
        return { ok: true, value: r };
      } catch (e) {
        return { ok: false, error: e instanceof Error ? e.message : String(e) };
      }
    },
  };
}

/** The identifiers in scope, with the shape of each value when known. */
type Scope = Map<string, CelShape | undefined>;

/**
 * Reject undeclared identifiers, unknown functions and (through `self`, `oldSelf` and the variables
 * of comprehensions over typed lists) undeclared fields at compile time, as kube's type checker
 * would. Returns the shape of `expr` when known.
 */
function checkExpr(
  expr: Expr | undefined,
  scope: Scope,
  refs: { oldSelf: boolean; errors: string[] },
  depth: number,
): CelShape | undefined {
  if (expr === undefined) return undefined;
  if (depth > 250) {
    refs.errors.push('expression nesting too deep');
    return undefined;
  }
  const k = expr.exprKind;
  switch (k.case) {
    case 'identExpr':
      if (k.value.name === 'oldSelf' && scope.has('oldSelf')) refs.oldSelf = true;
      if (!scope.has(k.value.name)) refs.errors.push(`undeclared reference to '${k.value.name}'`);
      return scope.get(k.value.name);
    case 'selectExpr': {
      const operand = checkExpr(k.value.operand, scope, refs, depth + 1);
      if (operand?.fields === undefined) return undefined;
      const field = operand.fields.get(k.value.field);
      if (field === undefined) {
        refs.errors.push(`undefined field '${k.value.field}'`);
        return undefined;
      }
      return field();
    }
    case 'callExpr': {
      const name = k.value.function;
      const target = k.value.target;
      const qualified =
        target !== undefined && target.exprKind.case === 'identExpr' && KNOWN_FUNCS.has(`${target.exprKind.value.name}.${name}`);
      if (!qualified) {
        if (!SPECIAL_CALLS.has(name) && !KNOWN_FUNCS.has(name)) refs.errors.push(`undeclared reference to '${name}'`);
        checkExpr(target, scope, refs, depth + 1);
      }
      for (const a of k.value.args) checkExpr(a, scope, refs, depth + 1);
      return undefined;
    }
    case 'listExpr':
      for (const e of k.value.elements) checkExpr(e, scope, refs, depth + 1);
      return undefined;
    case 'structExpr':
      if (k.value.messageName !== '') refs.errors.push(`undeclared reference to '${k.value.messageName}'`);
      for (const e of k.value.entries) {
        if (e.keyKind.case === 'mapKey') checkExpr(e.keyKind.value, scope, refs, depth + 1);
        checkExpr(e.value, scope, refs, depth + 1);
      }
      return undefined;
    case 'comprehensionExpr': {
      const c = k.value;
      const range = checkExpr(c.iterRange, scope, refs, depth + 1);
      checkExpr(c.accuInit, scope, refs, depth + 1);
      const inner: Scope = new Map(scope);
      // Over a list the (first) variable is an element; over a map it is a key (a string), and with two
      // variables over a list the first is the index: only a one-variable list element has the items' shape.
      inner.set(c.iterVar, c.iterVar2 === '' ? range?.items?.() : undefined);
      if (c.iterVar2 !== '') inner.set(c.iterVar2, range?.items?.());
      inner.set(c.accuVar, undefined);
      checkExpr(c.loopCondition, inner, refs, depth + 1);
      checkExpr(c.loopStep, inner, refs, depth + 1);
      const result: Scope = new Map(scope);
      result.set(c.accuVar, undefined);
      checkExpr(c.result, result, refs, depth + 1);
      return undefined;
    }
    default:
      return undefined;
  }
}

const RESERVED = new Set([
  'true',
  'false',
  'null',
  'in',
  'as',
  'break',
  'const',
  'continue',
  'else',
  'for',
  'function',
  'if',
  'import',
  'let',
  'loop',
  'package',
  'namespace',
  'return',
  'var',
  'void',
  'while',
]);

/** kube's CEL property-name escaping; undefined when the name is not accessible from CEL. */
export function escapeProperty(name: string): string | undefined {
  if (RESERVED.has(name)) return `__${name}__`;
  if (!/^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$/.test(name)) return undefined;
  return name.replace(/__/g, '__underscores__').replace(/\./g, '__dot__').replace(/-/g, '__dash__').replace(/\//g, '__slash__');
}
