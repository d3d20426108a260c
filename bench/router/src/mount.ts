/** A policy directory laid out and updated the way kubelet mounts a ConfigMap volume. */
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A kubelet-style ConfigMap volume: `<dir>/..<timestamp>/inference-policy.json`, `..data` → that
 * directory, `inference-policy.json` → `..data/inference-policy.json`. An update writes a new
 * timestamped directory, points `..data_tmp` at it, renames it over `..data` (the atomic step),
 * then removes the old directory — the order kubelet's AtomicWriter uses.
 */
export class KubeletMount {
  private seq = 0;
  private current: string | undefined = undefined;

  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  /** Write `body`; returns performance.now() right after the atomic rename. */
  write(body: string): number {
    const ts = `..${new Date().toISOString().replace(/[-:.TZ]/g, '_')}${String(++this.seq).padStart(4, '0')}`;
    mkdirSync(join(this.dir, ts));
    writeFileSync(join(this.dir, ts, 'inference-policy.json'), body);
    const tmp = join(this.dir, '..data_tmp');
    symlinkSync(ts, tmp);
    renameSync(tmp, join(this.dir, '..data'));
    const t = performance.now();
    if (this.current === undefined) symlinkSync('..data/inference-policy.json', join(this.dir, 'inference-policy.json'));
    else rmSync(join(this.dir, this.current), { recursive: true, force: true });
    this.current = ts;
    return t;
  }
}
