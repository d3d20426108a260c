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

/** Compile an expression over `self` (and `oldSelf` when allowOldSelf). Returns an error string on failure. */
export function compileCel(source: string, allowOldSelf: boolean): CelProgram | string {
  let parsed: ParsedExpr;
  try {
    parsed = parse(source);
  } catch (e) {
    return `compilation failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  const refs = { oldSelf: false, errors: [] as string[] };
  const scope = new Set([...TYPE_IDENTS, 'self']);
  if (allowOldSelf) scope.add('oldSelf');
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

/** Reject undeclared identifiers and unknown functions at compile time, as kube's type checker would. */
function checkExpr(expr: Expr | undefined, scope: Set<string>, refs: { oldSelf: boolean; errors: string[] }, depth: number): void {
  if (expr === undefined) return;
  if (depth > 250) {
    refs.errors.push('expression nesting too deep');
    return;
  }
  const k = expr.exprKind;
  switch (k.case) {
    case 'identExpr':
      if (k.value.name === 'oldSelf' && scope.has('oldSelf')) refs.oldSelf = true;
      if (!scope.has(k.value.name)) refs.errors.push(`undeclared reference to '${k.value.name}'`);
      return;
    case 'selectExpr':
      checkExpr(k.value.operand, scope, refs, depth + 1);
      return;
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
      return;
    }
    case 'listExpr':
      for (const e of k.value.elements) checkExpr(e, scope, refs, depth + 1);
      return;
    case 'structExpr':
      if (k.value.messageName !== '') refs.errors.push(`undeclared reference to '${k.value.messageName}'`);
      for (const e of k.value.entries) {
        if (e.keyKind.case === 'mapKey') checkExpr(e.keyKind.value, scope, refs, depth + 1);
        checkExpr(e.value, scope, refs, depth + 1);
      }
      return;
    case 'comprehensionExpr': {
      const c = k.value;
      checkExpr(c.iterRange, scope, refs, depth + 1);
      checkExpr(c.accuInit, scope, refs, depth + 1);
      const inner = new Set(scope);
      inner.add(c.iterVar);
      if (c.iterVar2 !== '') inner.add(c.iterVar2);
      inner.add(c.accuVar);
      checkExpr(c.loopCondition, inner, refs, depth + 1);
      checkExpr(c.loopStep, inner, refs, depth + 1);
      const result = new Set(scope);
      result.add(c.accuVar);
      checkExpr(c.result, result, refs, depth + 1);
      return;
    }
    default:
      return;
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
