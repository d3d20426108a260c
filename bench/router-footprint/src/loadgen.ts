/**
 * The open-loop load generator of the router benchmark: bench/router's own `--loadgen` child and its
 * IPC client, so both benchmarks drive the same generator with the same job and result shapes.
 */
export { startLoadgen } from '../../router/dist/procs.js';
export type { Loadgen } from '../../router/dist/procs.js';
export type { OpenJob as OpenLoopJob, OpenResult as LoadResult } from '../../router/dist/jobs.js';
export type { Summary as LatencySummary } from '../../router/dist/stats.js';
