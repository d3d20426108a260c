// Preloaded (node --import) into every test file's process by scripts/run-tests.mjs: when the file's
// process exits, it writes the file's wall time and CPU time to $KARS_TEST_TIMING_DIR/<pid>.json,
// which run-tests.mjs reads for its "where the time went" table.
//
// CPU time is the process's own user+system time plus that of every child it waited for (the kars
// processes, etcd, kube-apiserver a file starts and stops), read from /proc/self/stat. A child the
// file never waited for (left running, or reparented) is not counted. Off Linux: own time only.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const dir = process.env.KARS_TEST_TIMING_DIR;
// Only the test file processes node's runner starts (it sets NODE_TEST_CONTEXT), not their children.
if (dir && process.env.NODE_TEST_CONTEXT && process.argv[1]) {
  const file = relative(process.cwd(), process.argv[1]);
  process.on('exit', () => {
    try {
      writeFileSync(
        join(dir, `${process.pid}.json`),
        JSON.stringify({ file, wallMs: Math.round(performance.now()), cpuMs: cpuMsWithChildren() }),
      );
    } catch {
      // Timing is a report, never a reason for a test file to fail.
    }
  });
}

/** user+system CPU of this process and its waited-for children, in ms. */
export function cpuMsWithChildren() {
  try {
    // Fields after the ")" that ends the command name: utime, stime, cutime, cstime are 14–17 of
    // stat(5), in USER_HZ ticks (100 per second on Linux).
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
  } catch {
    const u = process.cpuUsage();
    return Math.round((u.user + u.system) / 1000);
  }
}
