/**
 * `@kars/policy-compiler/runtime`: everything of the compiler except offline admission. The
 * compilers, digests, ConfigMap shapes and the router wire contract (`router-view.ts`), without
 * `compileDocuments` and `admitKarsObject`, which need kube-schema (and with it CEL, RE2 and
 * protobuf: about 130 modules and 4 MB of heap). A router imports this entry, so it loads none of
 * that (ADR 0037); the package entry re-exports this one and adds the two.
 */
export * from './result.js';
export * from './digest.js';
export * from './configmaps.js';
export * from './kinds/index.js';
export * from './egress.js';
export * from './nearest.js';
export * from './agt-subset.js';
export * from './router-view.js';
export * from './view.js';
export * from './echo-ledger.js';
