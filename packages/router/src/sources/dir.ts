import { readdirSync, readFileSync, statSync, watch } from 'node:fs';
import type { FSWatcher } from 'node:fs';
import { join } from 'node:path';
import {
  DEFAULT_EGRESS_PORT,
  directoryDigest,
  egressOutcome,
  inferenceOutcome,
  toolOutcome,
  toolProfileDigest,
} from '@kars/policy-compiler/runtime';
import type { RouterCapabilities } from '@kars/policy-compiler/runtime';
import { sleep, systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';
import type { PolicyState } from '../state.js';

/**
 * Policy from a mounted ConfigMap directory (`--policy-dir`), for clusters where the router may not
 * talk to the API. Layout (each a mounted ConfigMap; all optional):
 *
 *   DIR/inference/          the InferencePolicy ConfigMap: first *.json in sorted order
 *   DIR/policies/           the ToolPolicy ConfigMap: profile.json and *.yaml/*.yml AGT files
 *   DIR/egress/             allowlist.json: {"schemaVersion":1,"endpoints":[{"host","port"}]} (baseline)
 *   DIR/egress-approvals/   approval-*.json files
 *
 * Files are read through symlinks (kubelet swaps `..data` atomically, so `stat`, never `lstat`).
 * A reload follows within about a second: fs.watch on each directory, plus a 500 ms check of the
 * newest mtime, which also catches symlink swaps that fs.watch misses.
 */
export class DirPolicySource {
  private lastSignature = '';
  private lastLoadMs = 0;
  private loaded = false;

  constructor(
    private readonly dir: string,
    private readonly state: PolicyState,
    private readonly capabilities: RouterCapabilities,
    private readonly pollMs = 500,
    /** `now()` for the view's age and the poll; `wallNow()` for approvals' expiry. Default the system clock. */
    private readonly clock: Clock = systemClock,
  ) {}

  private files(sub: string, exts: string[]): Array<{ name: string; path: string }> {
    const d = join(this.dir, sub);
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return [];
    }
    return names
      .filter((n) => !n.startsWith('..') && exts.some((e) => n.endsWith(e)))
      .sort()
      .map((n) => ({ name: n, path: join(d, n) }))
      .filter((f) => {
        try {
          return statSync(f.path).isFile();
        } catch {
          return false;
        }
      });
  }

  /** mtimes and sizes of every file, through symlinks: changes whenever any content may have. */
  private signature(): string {
    const parts: string[] = [];
    for (const sub of ['inference', 'policies', 'egress', 'egress-approvals']) {
      for (const f of this.files(sub, ['.json', '.yaml', '.yml'])) {
        try {
          const st = statSync(f.path);
          parts.push(`${f.path}:${st.mtimeMs}:${st.size}:${st.ino}`);
        } catch {
          parts.push(`${f.path}:gone`);
        }
      }
    }
    return parts.join('|');
  }

  /** Load everything now. */
  load(): void {
    this.lastSignature = this.signature();
    this.lastLoadMs = this.clock.now();
    this.loaded = true;
    const read = (p: string): string | undefined => {
      try {
        return readFileSync(p, 'utf8');
      } catch {
        return undefined;
      }
    };
    // Each kind is accepted or refused by the wire contract's rules (@kars/policy-compiler router-view).
    const inf = this.files('inference', ['.json'])[0];
    if (!inf) this.state.setInference({ kind: 'none' });
    else {
      const body = read(inf.path);
      this.state.setInference(
        body === undefined
          ? { kind: 'error', error: `cannot read ${inf.path}`, source: inf.path, rejectedDigest: null }
          : inferenceOutcome(body, inf.name, inf.path, this.capabilities),
      );
    }
    const profile = read(join(this.dir, 'policies', 'profile.json'));
    const agtFiles = this.files('policies', ['.yaml', '.yml']).map((f) => ({ name: f.name, body: read(f.path) ?? '' }));
    if (profile === undefined && agtFiles.length === 0) this.state.setTools({ kind: 'none' });
    else {
      const agt = agtFiles.length > 0 ? agtFiles.map((f) => f.body).join('\n') : undefined;
      const profileJson = profile ?? '{"appliesTo":{}}';
      this.state.setTools(
        toolOutcome(
          'mounted',
          profileJson,
          agt,
          { profile: toolProfileDigest(profileJson), agt: agtFiles.length > 0 ? directoryDigest(agtFiles) : null },
          join(this.dir, 'policies'),
          this.capabilities,
        ),
      );
    }
    const baselineText = read(join(this.dir, 'egress', 'allowlist.json'));
    let baseline: Array<{ host: string; port: number }> = [];
    try {
      const b =
        baselineText === undefined ? undefined : (JSON.parse(baselineText) as { endpoints?: Array<{ host?: unknown; port?: unknown }> });
      baseline = (b?.endpoints ?? [])
        .filter((e) => typeof e.host === 'string')
        .map((e) => ({ host: String(e.host), port: typeof e.port === 'number' ? e.port : DEFAULT_EGRESS_PORT }));
    } catch {
      baseline = [];
    }
    const approvalFiles: Record<string, string> = {};
    for (const f of this.files('egress-approvals', ['.json'])) approvalFiles[f.name] = read(f.path) ?? '';
    this.state.setEgress(egressOutcome(baseline, approvalFiles, this.clock.wallNow(), join(this.dir, 'egress-approvals')).outcome);
  }

  /** Milliseconds since the directory was last checked (the view's age); Infinity before the first load. */
  viewAgeMs(): number {
    return this.loaded ? this.clock.now() - this.lastLoadMs : Infinity;
  }

  /** Load, then reload on change until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    this.load();
    const watchers: FSWatcher[] = [];
    const check = (): void => {
      if (signal.aborted) return;
      const sig = this.signature();
      if (sig !== this.lastSignature) this.load();
      else this.lastLoadMs = this.clock.now();
    };
    for (const sub of ['', 'inference', 'policies', 'egress', 'egress-approvals']) {
      try {
        const w = watch(join(this.dir, sub), () => check());
        w.on('error', () => undefined);
        watchers.push(w);
      } catch {
        // the directory may not exist yet; the poll covers it
      }
    }
    // The poll: one check every pollMs on the clock until `signal` aborts (sleep ends at once then).
    while (!signal.aborted) {
      await sleep(this.clock, this.pollMs, signal);
      check();
    }
    for (const w of watchers) w.close();
  }
}
