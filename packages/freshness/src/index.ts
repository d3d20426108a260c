/**
 * @kars/freshness: the freshness conformance probe (`kars freshness probe`) as a library, so the CLI
 * and the fault conformance suite measure edits the same way.
 */
export * from './probe.js';
export * from './stats.js';
export * from './format.js';
