/** The conformance suite's building blocks: the local stack as processes, and the faults. */
export * from './stack.js';
export * from './faults.js';
