// The apiserver's write path in process, without HTTP or TLS: how much CPU a create and an update
// of a small ConfigMap cost in the object service (admission, defaulting, managedFields, SQLite,
// the commit, the watch cache and the lifecycle hook), and each stage alone in a tight loop.
// This separates the object service's cost from what bench/apiserver/dist/main.js measures end to end.
//
//   npx tsc -b && node bench/write-path/dist/main.js   # BENCH_WP_OPS (default 4000), BENCH_WP_ROUNDS (3)
//
// Prints µs of CPU per write (process.cpuUsage, the whole process: the WAL sync and checkpoint
// threads included) for group commit at 64 writes in flight, and µs per call for each stage.
// Medians over rounds. Not a test: nothing is asserted.
import { CONC, OPS, ROUNDS, med } from './common.js';
import { fresh, serviceRound } from './service.js';
import type { RoundCost } from './service.js';
import { stages } from './stages.js';

const results: RoundCost[] = [];
for (let r = 0; r < ROUNDS; r++) results.push(await serviceRound());
const { ri, close } = await fresh();
const st = stages(ri);
close();
const out = [
  `### Object service write path in process (no HTTP/TLS), ${OPS} creates + ${OPS} updates, ${CONC} in flight, group commit; median of ${ROUNDS} rounds`,
  '',
  '| op | µs CPU per write (whole process) | writes/s (one thread) | every round (µs CPU) |',
  '|---|---|---|---|',
];
for (const op of ['create', 'update'] as const) {
  const cpu = med(results.map((x) => x[op].cpu / OPS));
  const rate = med(results.map((x) => OPS / (x[op].wall / 1000)));
  out.push(`| ${op} | ${cpu.toFixed(0)} | ${rate.toFixed(0)} | ${results.map((x) => (x[op].cpu / OPS).toFixed(0)).join(', ')} |`);
}
out.push('', '| stage alone (tight loop) | µs per call |', '|---|---|');
for (const [name, us] of st) out.push(`| ${name} | ${us.toFixed(2)} |`);
process.stdout.write(`${out.join('\n')}\n`);
