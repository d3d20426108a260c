// Small helpers: a monotonic clock in milliseconds, and removing an element from an array.

import { nowUs } from '../../lib/dist/index.js';

/** Monotonic milliseconds (from `nowUs`). */
export const nowMs = (): number => nowUs() / 1000;

/** Remove the first `x` from `arr` (in place), if it is there. */
export function remove<T>(arr: T[], x: T): void {
  const i = arr.indexOf(x);
  if (i >= 0) arr.splice(i, 1);
}
