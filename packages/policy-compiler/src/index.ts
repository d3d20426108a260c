/**
 * `@kars/policy-compiler`: pure, synchronous, deterministic compilers from kars policies to the
 * ConfigMap bytes routers load and the `sha256:` digests they echo (kars-wire-contract.md §2).
 * No I/O and no clock: times come in as arguments. `@kars/policy-compiler/runtime` is the same
 * without offline admission (`compileDocuments`, `admitKarsObject`), for processes that must not
 * load kube-schema.
 */
export * from './runtime.js';
export * from './compile-docs.js';
export * from './admission.js';
