/** Small JSON helpers with no schema knowledge. */

import { isObject } from '@kars/kube-core';

/** True when v is a plain JSON object (not an array, not null): kube-core's, re-exported for this package's modules. */
export { isObject };

/** Own enumerable property check that ignores the prototype chain ("__proto__", "constructor"). */
export function hasOwn(o: Record<string, unknown>, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

/** Deep copy of a JSON value (defaults must never be shared between objects). */
export function deepCopy<T>(v: T): T {
  if (Array.isArray(v)) return v.map((x: unknown) => deepCopy(x)) as T;
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) defineKey(out, k, deepCopy(x));
    return out as T;
  }
  return v;
}

/** Set a key even when it is "__proto__". */
export function defineKey(o: Record<string, unknown>, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
}

/** Canonical string for equality and hashing: object keys sorted. */
export function canonical(v: unknown, depth = 0): string {
  if (depth > 1100) return '"<deep>"';
  if (Array.isArray(v)) return `[${v.map((x: unknown) => canonical(x, depth + 1)).join(',')}]`;
  if (isObject(v)) {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k], depth + 1)}`).join(',')}}`;
  }
  if (v === undefined) return 'null';
  return JSON.stringify(v) ?? 'null';
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return canonical(a) === canonical(b);
}

/** The kube-style path of the first place where value nests deeper than limit, or undefined. Iterative. */
export function findTooDeep(value: unknown, limit: number): string | undefined {
  const stack: [unknown, string, number][] = [[value, '', 0]];
  while (stack.length > 0) {
    const [v, path, depth] = stack.pop() as [unknown, string, number];
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= limit) return path;
    if (Array.isArray(v)) v.forEach((x: unknown, i) => stack.push([x, `${path}[${i}]`, depth + 1]));
    else for (const [k, x] of Object.entries(v)) stack.push([x, path === '' ? k : `${path}.${k}`, depth + 1]);
  }
  return undefined;
}

/**
 * Structural equality of two JSON values without serialising them (key order ignored; a member
 * whose value is undefined counts as absent, as in JSON). For a deep but small value; depth-capped.
 */
export function jsonEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (a === b) return true;
  if (depth > 200 || typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  let na = 0;
  for (const k of Object.keys(ra)) {
    if (ra[k] === undefined) continue;
    na++;
    if (!Object.hasOwn(rb, k) || !jsonEqual(ra[k], rb[k], depth + 1)) return false;
  }
  let nb = 0;
  for (const k of Object.keys(rb)) if (rb[k] !== undefined) nb++;
  return na === nb;
}
