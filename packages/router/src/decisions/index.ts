/** Decision records, the tamper-evident decision log and its chain check (ADR 0040). */
export * from './record.js';
export * from './chain.js';
export { DecisionLog, logFiles, type DecisionLogOptions, type DecisionSink } from './log.js';
export { DecisionRecorder, bindRequest, policiesFor, scopeOf, type DecisionInput, type RequestScope } from './recorder.js';
export { lineMatches, parseDecisionQuery, serveDecisions, type DecisionQuery } from './stream.js';
