/**
 * JSON patch (RFC 6902), hand-written so errors match kube-apiserver: a body that is not a list
 * of objects is a 400, any operation that fails to apply (bad op, bad path, failed test) a 422.
 */
import { PatchError } from './errors.js';
import { clone, deepEqual, isObject, setOwn } from './util.js';

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

interface Op {
  op: string;
  path: string[];
  from?: string[];
  value?: unknown;
}

/** Apply an RFC 6902 operation list. Returns a new value; the input is never mutated. */
export function applyJsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new PatchError('json patch must be a list of operations', 'KARS_PATCH_INVALID', { httpStatus: 400 });
  if (!ops.every(isObject)) throw new PatchError('json patch operations must be objects', 'KARS_PATCH_INVALID', { httpStatus: 400 });
  const parsed = ops.map((o, i) => parseOp(o, i));
  let doc = clone(target);
  parsed.forEach((op, i) => {
    doc = applyOp(doc, op, i);
  });
  return doc;
}

function invalid(msg: string): PatchError {
  return new PatchError(msg, 'KARS_PATCH_INVALID', { httpStatus: 422 });
}

function parsePointer(p: unknown, i: number, field: string): string[] {
  if (typeof p !== 'string') throw invalid(`operation ${i}: "${field}" must be a string`);
  if (p === '') return [];
  if (!p.startsWith('/')) throw invalid(`operation ${i}: invalid JSON pointer ${JSON.stringify(p)}`);
  return p
    .slice(1)
    .split('/')
    .map((t) => {
      if (/~[^01]|~$/.test(t)) throw invalid(`operation ${i}: invalid escape in JSON pointer ${JSON.stringify(p)}`);
      return t.replace(/~1/g, '/').replace(/~0/g, '~');
    });
}

function parseOp(o: Record<string, unknown>, i: number): Op {
  const op = o['op'];
  if (typeof op !== 'string' || !OPS.has(op)) throw invalid(`operation ${i}: unexpected kind ${JSON.stringify(op)}`);
  const out: Op = { op, path: parsePointer(o['path'], i, 'path') };
  if (op === 'add' || op === 'replace' || op === 'test') {
    if (!Object.hasOwn(o, 'value')) throw invalid(`operation ${i} (${op}): missing value`);
    out.value = o['value'];
  }
  if (op === 'move' || op === 'copy') out.from = parsePointer(o['from'], i, 'from');
  return out;
}

function pointerText(path: string[]): string {
  return path.map((t) => '/' + t.replace(/~/g, '~0').replace(/\//g, '~1')).join('');
}

function arrayIndex(token: string, len: number, allowEnd: boolean): number | undefined {
  if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
  const n = Number(token);
  return n < len || (allowEnd && n === len) ? n : undefined;
}

/** Resolve a pointer; `found` is false when any segment is missing. */
function get(doc: unknown, path: string[]): { found: boolean; value: unknown } {
  let cur = doc;
  for (const t of path) {
    if (Array.isArray(cur)) {
      const n = arrayIndex(t, cur.length, false);
      if (n === undefined) return { found: false, value: undefined };
      cur = cur[n];
    } else if (isObject(cur) && Object.hasOwn(cur, t)) {
      cur = cur[t];
    } else {
      return { found: false, value: undefined };
    }
  }
  return { found: true, value: cur };
}

function parentOf(doc: unknown, path: string[], i: number): { parent: unknown; last: string } {
  const last = path[path.length - 1] ?? '';
  const p = get(doc, path.slice(0, -1));
  if (!p.found || (!Array.isArray(p.value) && !isObject(p.value))) {
    throw invalid(`operation ${i}: path ${pointerText(path)} does not exist (missing parent)`);
  }
  return { parent: p.value, last };
}

function add(doc: unknown, path: string[], value: unknown, i: number): unknown {
  if (path.length === 0) return value;
  const { parent, last } = parentOf(doc, path, i);
  if (Array.isArray(parent)) {
    const n = last === '-' ? parent.length : arrayIndex(last, parent.length, true);
    if (n === undefined) throw invalid(`operation ${i}: index out of range at ${pointerText(path)}`);
    parent.splice(n, 0, value);
  } else {
    setOwn(parent as Record<string, unknown>, last, value);
  }
  return doc;
}

function remove(doc: unknown, path: string[], i: number): unknown {
  if (path.length === 0) throw invalid(`operation ${i}: cannot remove the whole document`);
  const { parent, last } = parentOf(doc, path, i);
  if (Array.isArray(parent)) {
    const n = arrayIndex(last, parent.length, false);
    if (n === undefined) throw invalid(`operation ${i}: index out of range at ${pointerText(path)}`);
    parent.splice(n, 1);
  } else {
    const obj = parent as Record<string, unknown>;
    if (!Object.hasOwn(obj, last)) throw invalid(`operation ${i}: path ${pointerText(path)} does not exist`);
    delete obj[last];
  }
  return doc;
}

function applyOp(doc: unknown, op: Op, i: number): unknown {
  switch (op.op) {
    case 'add':
      return add(doc, op.path, clone(op.value), i);
    case 'remove':
      return remove(doc, op.path, i);
    case 'replace':
      if (!get(doc, op.path).found) throw invalid(`operation ${i}: path ${pointerText(op.path)} does not exist`);
      if (op.path.length === 0) return clone(op.value);
      return add(remove(doc, op.path, i), op.path, clone(op.value), i);
    case 'move': {
      const from = op.from ?? [];
      const src = get(doc, from);
      if (!src.found) throw invalid(`operation ${i}: from ${pointerText(from)} does not exist`);
      if (op.path.length > from.length && from.every((t, k) => op.path[k] === t)) {
        throw invalid(`operation ${i}: cannot move ${pointerText(from)} into its own child`);
      }
      return add(remove(doc, from, i), op.path, src.value, i);
    }
    case 'copy': {
      const from = op.from ?? [];
      const src = get(doc, from);
      if (!src.found) throw invalid(`operation ${i}: from ${pointerText(from)} does not exist`);
      return add(doc, op.path, clone(src.value), i);
    }
    default: {
      // test. Like kube (evanphx/json-patch), a missing path equals an expected null.
      const cur = get(doc, op.path);
      const ok = cur.found ? deepEqual(cur.value, op.value) : op.value === null;
      if (!ok) {
        throw new PatchError(`testing value ${pointerText(op.path)} failed`, 'KARS_PATCH_TEST_FAILED', { httpStatus: 422 });
      }
      return doc;
    }
  }
}
