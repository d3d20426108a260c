/**
 * Deep copy of a JSON value (plain objects, arrays, strings, numbers, booleans, null; an
 * `undefined` member is kept as `undefined`). About ten times cheaper than `structuredClone`
 * for the small objects an API server handles, because it skips the serialise/deserialise round
 * trip; the apiserver's write path copies several objects per request.
 *
 * Only for JSON data: class instances, Dates, Maps and cycles are not supported (a Date becomes a
 * plain object, a cycle overflows the stack). An own `__proto__` key (as `JSON.parse` can produce)
 * is copied as an own property, never as the prototype.
 */
export function cloneJson<T>(v: T): T {
  return copy(v) as T;
}

function copy(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = copy(v[i]);
    return out;
  }
  const src = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(src)) {
    const x = copy(src[k]);
    if (k === '__proto__') Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    else out[k] = x;
  }
  return out;
}
