/**
 * `@kars/policy-compiler`: pure, synchronous, deterministic compilers from kars policies to the
 * ConfigMap bytes routers load and the `sha256:` digests they echo (kars-wire-contract.md §2).
 * No I/O and no clock: times come in as arguments.
 */
export * from './result.js';
export * from './digest.js';
export * from './configmaps.js';
export * from './inference.js';
export * from './tool.js';
export * from './egress.js';
export * from './compile-docs.js';
export * from './admission.js';
export * from './nearest.js';
export * from './agt-subset.js';
export * from './router-view.js';
