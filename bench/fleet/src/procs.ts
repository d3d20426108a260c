// Process and socket figures from /proc: CPU seconds, resident set, bytes through sockets, and the
// TCP connections open to a port. Linux only (the benchmark's machine).

import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) a process has used so far; NaN when it is gone. */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/** Resident set in MiB; NaN when the process is gone. */
export function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Bytes a process has read and written through read/write-family system calls (sockets included). */
export function ioBytes(pid: number | undefined): { read: number; written: number } {
  if (pid === undefined) return { read: NaN, written: NaN };
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const v = (k: string): number => Number(new RegExp(`^${k}: (\\d+)`, 'm').exec(io)?.[1] ?? NaN);
    return { read: v('rchar'), written: v('wchar') };
  } catch {
    return { read: NaN, written: NaN };
  }
}

/** ESTABLISHED TCP connections whose remote end is 127.0.0.1:`port` (client sides, from /proc/net/tcp). */
export function connectionsTo(port: number): number {
  let n = 0;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4 || f[3] !== '01') continue;
    if (parseInt((f[2] ?? '').split(':')[1] ?? '', 16) === port) n++;
  }
  return n;
}
