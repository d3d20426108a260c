/** JSON merge patch (RFC 7386). */
import { clone, isObject, setOwn } from './util.js';

/** Apply an RFC 7386 merge patch. Returns a new value; the inputs are never mutated. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  return mergeInto(clone(target), patch);
}

function mergeInto(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const result: Record<string, unknown> = isObject(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete result[k];
    else setOwn(result, k, mergeInto(Object.hasOwn(result, k) ? result[k] : undefined, v));
  }
  return result;
}
