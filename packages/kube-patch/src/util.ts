/** Small JSON helpers shared by the patch modules. */
import { cloneJson, isObject, jsonEqual } from '@kars/kube-core';

/** kube-core's, re-exported for the patch modules: `deepEqual` is JSON equality (an undefined member counts as absent). */
export { isObject, jsonEqual as deepEqual };

/** Deep copy of a JSON value (undefined stays undefined). */
export function clone<T>(v: T): T {
  return cloneJson(v);
}

/** Set an own property, safe for the key "__proto__". */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}
