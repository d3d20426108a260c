/** Small JSON helpers with no schema knowledge. */

import { isObject, jsonEqual } from '@kars/kube-core';

/** kube-core's, re-exported for this package's modules: `isObject`, and `jsonEqual` (JSON equality; an undefined member counts as absent). */
export { isObject, jsonEqual };

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
