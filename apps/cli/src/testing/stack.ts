/**
 * Test harness for CLI tests: a `kars apiserver` (in process, temporary data dir) with the CRDs, a controller, the
 * OpenAI and MCP stubs, and routers on demand — then the real `kars` binary run as a process (`node
 * apps/cli/bin/kars.js …`) with arguments, returning its exit code and output, as a user would run it.
 */
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { clientFor, fastWatchConfig } from '@kars/kube-runtime/testing';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';
import { PolicyController } from '@kars/policy-controller';
import { startRouter } from '@kars/router';
import type { RunningRouter } from '@kars/router';
import { startMcpStub, startOpenAIStub } from '@kars/router/stubs';
import type { McpStub, OpenAIStub } from '@kars/router/stubs';

/** The repository root (for examples/ and the bin). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
export const KARS_BIN = join(REPO_ROOT, 'apps/cli/bin/kars.js');

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `kars <args>` as a process; `env` is added to a copy of this process's env (KUBECONFIG removed unless given). */
export function runKars(
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; input?: string } = {},
): Promise<RunResult> {
  const env: Record<string, string | undefined> = { ...process.env, KUBECONFIG: undefined, ...opts.env };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [KARS_BIN, ...args], {
      cwd: opts.cwd ?? REPO_ROOT,
      env: env as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

export interface TestStack {
  ts: TestServer;
  kubeconfig: string;
  openai: OpenAIStub;
  mcp: McpStub;
  /** Start a router for `sandbox` in `namespace` (default `default`), with egress and the MCP gateway. */
  router(sandbox: string, namespace?: string): Promise<RunningRouter>;
  close(): Promise<void>;
}

/** Start apiserver + CRDs + controller + stubs. Routers start on demand and stop with {@link TestStack.close}. */
export async function startTestStack(opts: { namespaces?: string[] } = {}): Promise<TestStack> {
  const log = pino({ level: 'silent' });
  const cfg = fastWatchConfig();
  const ts = await startTestServer({ bookmarkIntervalSeconds: 1 });
  await createCrds(ts.client, ...allCrds());
  for (const ns of opts.namespaces ?? [])
    await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const ac = new AbortController();
  const clients: KubeClient[] = [];
  const newClient = (): KubeClient => {
    const c = clientFor(ts.server.kubeconfigPath, cfg);
    clients.push(c);
    return c;
  };
  const controller = new PolicyController({
    client: newClient(),
    config: cfg,
    metrics: new RuntimeMetrics(),
    log,
    leaderElection: { enabled: false, namespace: 'default', name: 'c', identity: 'c' },
  });
  const runs: Array<Promise<void>> = [controller.run(ac.signal)];
  const openai = await startOpenAIStub();
  const mcp = await startMcpStub({ tools: [{ name: 'echo' }, { name: 'read_file' }, { name: 'delete_file' }] });
  let n = 0;
  return {
    ts,
    kubeconfig: ts.server.kubeconfigPath,
    openai,
    mcp,
    async router(sandbox, namespace = 'default') {
      const r = await startRouter(
        {
          sandbox,
          namespace,
          listen: '127.0.0.1:0',
          egressListen: '127.0.0.1:0',
          upstream: openai.url,
          mcpUpstream: mcp.url,
          source: { kind: 'api', client: newClient(), config: cfg },
          instance: `test-${++n}`,
          metrics: new RuntimeMetrics(),
          log,
        },
        ac.signal,
      );
      runs.push(r.done);
      return r;
    },
    async close() {
      ac.abort();
      await Promise.all(runs);
      for (const c of clients) c.close();
      await openai.close();
      await mcp.close();
      await ts.close();
    },
  };
}

export { until } from '@kars/kube-runtime/testing';

/** POST a chat completion asking for `maxTokens` to a router. */
export async function chat(routerUrl: string, maxTokens: number): Promise<{ status: number; body: any }> {
  const res = await fetch(`${routerUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', max_tokens: maxTokens, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

/** Call a tool through a router's MCP gateway; returns the JSON-RPC response. */
export async function callTool(routerUrl: string, tool: string): Promise<any> {
  const res = await fetch(`${routerUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: { path: '/tmp/x' } } }),
  });
  return (await res.json()) as unknown;
}
