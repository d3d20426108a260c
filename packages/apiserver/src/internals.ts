/**
 * `@kars/apiserver/internals`: the pieces of the write path, for the write-path benchmark
 * (bench/write-path), which times each stage of one create or update in process: the store, the
 * object service and its registry, watch cache and lifecycle controllers, admission and the
 * strategy functions. Not a stable API; `@kars/apiserver` is.
 */
export { Store } from './storage/store.js';
export { ObjectService } from './service.js';
export { Registry } from './registry/registry.js';
export { builtinResources } from './registry/builtins.js';
export { WatchCache } from './watch/cache.js';
export { Lifecycle } from './lifecycle.js';
export { admitObject } from './admission.js';
export { nowRfc3339 } from './meta.js';
export { bumpGeneration, coerceBody, fieldOptions, finalizeForCreate, sameIgnoringManagedTimes } from './strategy.js';
export type { Target } from './strategy.js';
