/** The network side of the fault: which client connections are open, and the iptables black hole. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Client-side ports of ESTABLISHED TCP connections to 127.0.0.1:`port` (from /proc/net/tcp). */
export function clientPortsTo(port: number): number[] {
  const ports: number[] = [];
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4 || f[3] !== '01') continue;
    const lp = parseInt(f[1]?.split(':')[1] ?? '', 16);
    const rp = parseInt(f[2]?.split(':')[1] ?? '', 16);
    if (rp === port) ports.push(lp);
  }
  return ports;
}

/** Packet-level black hole for chosen flows (iptables DROP in both directions, own chain). */
export const Blackhole = {
  chain: 'KARS_BENCH_BLACKHOLE',
  active: false,
  ipt(...args: string[]): string {
    return execFileSync('iptables', ['-w', ...args], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  },
  setup(): void {
    try {
      this.ipt('-N', this.chain);
    } catch {
      this.ipt('-F', this.chain);
    }
    try {
      this.ipt('-C', 'INPUT', '-j', this.chain);
    } catch {
      this.ipt('-I', 'INPUT', '-j', this.chain);
    }
    this.active = true;
  },
  drop(clientPort: number, serverPort: number): void {
    const base = ['-A', this.chain, '-p', 'tcp', '-s', '127.0.0.1', '-d', '127.0.0.1'];
    this.ipt(...base, '--sport', String(clientPort), '--dport', String(serverPort), '-j', 'DROP');
    this.ipt(...base, '--sport', String(serverPort), '--dport', String(clientPort), '-j', 'DROP');
  },
  flush(): void {
    if (this.active) this.ipt('-F', this.chain);
  },
  teardown(): void {
    if (!this.active) return;
    this.active = false;
    for (const args of [
      ['-D', 'INPUT', '-j', this.chain],
      ['-F', this.chain],
      ['-X', this.chain],
    ]) {
      try {
        this.ipt(...args);
      } catch {
        // already gone
      }
    }
  },
};
