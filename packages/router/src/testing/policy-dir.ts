/**
 * A real router on a temporary `--policy-dir`, for tests that attack it with real requests.
 *
 * `startDirRouter` writes the given compiled files into a fresh directory laid out as
 * {@link DirPolicySource} reads it, starts {@link startRouter} on it (inference upstream, optional
 * MCP upstream, optional egress proxy), and returns handles to rewrite policy and stop everything.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@kars/kube-core';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { startRouter, type RouterOptions, type RunningRouter } from '../server.js';

/** The files of a policy directory, by kind; each is optional. */
export interface PolicyDirFiles {
  /** `inference/inference-policy.json` (an object is JSON-encoded). */
  inference?: unknown;
  /** `policies/profile.json`. */
  toolProfile?: unknown;
  /** `policies/agt-profile.yaml`. */
  agt?: string;
  /** `egress/allowlist.json` endpoints. */
  baseline?: Array<{ host: string; port: number }>;
  /** `egress-approvals/approval-<name>.json`. */
  approvals?: Record<string, { hosts: Array<{ host: string; port: number }>; expiresAt: string }>;
}

/** A running router on a policy directory. */
export interface DirRouter {
  router: RunningRouter;
  dir: string;
  /** Rewrite one approval file (undefined deletes it); the router reloads within about a second. */
  setApproval(name: string, a: { hosts: Array<{ host: string; port: number }>; expiresAt: string } | undefined): void;
  stop(): Promise<void>;
}

function write(path: string, body: unknown): void {
  writeFileSync(path, typeof body === 'string' ? body : JSON.stringify(body));
}

/** Start a router on a fresh policy directory holding `files`. */
export async function startDirRouter(
  files: PolicyDirFiles,
  opts: Partial<RouterOptions> & Pick<RouterOptions, 'upstream'>,
): Promise<DirRouter> {
  const dir = mkdtempSync(join(tmpdir(), 'kars-hostile-'));
  for (const sub of ['inference', 'policies', 'egress', 'egress-approvals']) mkdirSync(join(dir, sub));
  if (files.inference !== undefined) write(join(dir, 'inference', 'inference-policy.json'), files.inference);
  if (files.toolProfile !== undefined) write(join(dir, 'policies', 'profile.json'), files.toolProfile);
  if (files.agt !== undefined) write(join(dir, 'policies', 'agt-profile.yaml'), files.agt);
  write(join(dir, 'egress', 'allowlist.json'), { schemaVersion: 1, endpoints: files.baseline ?? [] });
  const setApproval: DirRouter['setApproval'] = (name, a) => {
    const p = join(dir, 'egress-approvals', `approval-${name}.json`);
    if (a === undefined) {
      try {
        unlinkSync(p);
      } catch {
        // already gone
      }
    } else write(p, { approvalName: name, ...a });
  };
  for (const [name, a] of Object.entries(files.approvals ?? {})) setApproval(name, a);
  const ac = new AbortController();
  const router = await startRouter(
    {
      sandbox: 'sb',
      namespace: 'ns',
      listen: '127.0.0.1:0',
      source: { kind: 'dir', dir },
      instance: 'test',
      metrics: new RuntimeMetrics(),
      log: silentLogger,
      ...opts,
    },
    ac.signal,
  );
  return {
    router,
    dir,
    setApproval,
    async stop() {
      ac.abort();
      await router.done;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The compiled InferencePolicy body with only a token budget. */
export function budgetPolicy(
  tb: { perRequestTokens?: number | null; dailyTokens?: number | null; monthlyTokens?: number | null },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    appliesTo: { sandboxName: 'sb', sandboxMatchLabels: {}, action: null },
    tokenBudget: {
      perRequestTokens: tb.perRequestTokens ?? null,
      dailyTokens: tb.dailyTokens ?? null,
      monthlyTokens: tb.monthlyTokens ?? null,
    },
    contentSafety: null,
    modelPreference: null,
    provider: null,
    guardrails: null,
    displayName: null,
    ...extra,
  };
}
