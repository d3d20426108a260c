/**
 * Test harness for CLI tests: a `kars apiserver` (in process, temporary data dir) with the CRDs, a controller, the
 * OpenAI and MCP stubs, and routers on demand — then the real `kars` binary run as a process (`node
 * apps/cli/bin/kars.js …`) with arguments, returning its exit code and output, as a user would run it.
 */
import { pino } from 'pino';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { clientFor, fastWatchConfig } from '@kars/kube-runtime/testing';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { allCrds } from '@kars/policy-api';
import { PolicyController } from '@kars/policy-controller';
import { startRouter } from '@kars/router';
import type { RouterOptions, RunningRouter } from '@kars/router';
import { startMcpStub, startOpenAIStub } from '@kars/router/stubs';
import type { McpStub, OpenAIStub } from '@kars/router/stubs';

export { chat, callTool, KARS_BIN, REPO_ROOT, runKars } from './run-kars.js';
export type { RunResult } from './run-kars.js';

export interface TestStack {
  ts: TestServer;
  kubeconfig: string;
  openai: OpenAIStub;
  mcp: McpStub;
  /**
   * Start a router for `sandbox` in `namespace` (default `default`), with egress and the MCP gateway;
   * `extra` adds router options (an admin listener, named MCP servers).
   */
  router(
    sandbox: string,
    namespace?: string,
    extra?: Pick<RouterOptions, 'adminListen' | 'adminToken' | 'mcpUpstreams' | 'decisionLog'>,
  ): Promise<RunningRouter>;
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
    async router(sandbox, namespace = 'default', extra = {}) {
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
          ...extra,
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
