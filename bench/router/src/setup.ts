/**
 * The processes of the data-plane phases: the stubs, the router on a kubelet-style policy
 * directory, the peers (node:http proxy, nginx, Portkey, the router without a policy), the load
 * generator and the routers of the other APIs, each checked with a request or two before use.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { KARS_BIN, errMsg, log, splitArgs } from '../../lib/dist/index.js';
import { APIS, chatBody, type ApiName } from './apis.js';
import { REALISTIC_CAP, SANDBOX, TRAFFIC_MAX_TOKENS, type PeerName } from './config.js';
import { oneRequest } from './http.js';
import { KubeletMount } from './mount.js';
import { portkeyHeaders, startNginx, startPortkey } from './peers.js';
import { SELF, startChild, startLoadgen } from './procs.js';
import { need, type Run } from './run.js';

/** Per API, the peers left out of its rows and why. */
export type ApiSkipped = Record<ApiName, Partial<Record<PeerName, string>>>;

/** Node flags for a router child (BENCH_ROUTER_NODE_ARGS). */
const routerNodeArgs = (): string[] => splitArgs(process.env.BENCH_ROUTER_NODE_ARGS);

/**
 * Start what the phases need: the stub (for any phase but the decision one), the Anthropic stub
 * (for the Messages rows), and for the data-plane phases the router on the mounted policy
 * directory, the peers and the load generator, then one router per other API. Returns the mount
 * (the dir phase swaps it) and, per API, the peers that cannot carry it.
 */
export async function startProcesses(run: Run): Promise<{ mount: KubeletMount; apiSkipped: ApiSkipped }> {
  const { cfg, phases, procs, tmp } = run;
  const peers = cfg.peers;
  const needDataPlane = phases.has('latency') || phases.has('throughput') || phases.has('ttfb') || phases.has('dir');
  if (needDataPlane || phases.has('api')) {
    procs.stub = await startChild('stub', [SELF, '--stub'], { nodeArgs: splitArgs(process.env.BENCH_STUB_NODE_ARGS) });
    log(`stub (pid ${procs.stub.pid}) at ${procs.stub.url}`);
  }
  const apiPhases = phases.has('latency') || phases.has('ttfb');
  if (cfg.apis.includes('messages') && apiPhases) {
    procs.anthropicStub = await startChild('anthropic stub', [SELF, '--stub', 'anthropic'], {
      nodeArgs: splitArgs(process.env.BENCH_STUB_NODE_ARGS),
    });
    log(`Anthropic stub (pid ${procs.anthropicStub.pid}) at ${procs.anthropicStub.url}`);
  }
  /** The router's upstream flags: the OpenAI stub as the default, the Anthropic stub by name (issue 20's `--upstream NAME=URL`). */
  const upstreamArgs = (): string[] => [
    '--upstream',
    need(procs.stub, 'the stub').url,
    ...(procs.anthropicStub ? ['--upstream', `anthropic=${procs.anthropicStub.url}`] : []),
  ];

  // ---- the router from a kubelet-style policy directory --------------------------------------
  const mount = new KubeletMount(join(tmp, 'policy', 'inference'));
  if (needDataPlane) {
    const stub = need(procs.stub, 'the stub');
    mount.write(run.compiled(REALISTIC_CAP).body);
    const router = await startChild(
      'router (dir)',
      [KARS_BIN, 'router', '--policy-dir', join(tmp, 'policy'), '--sandbox', SANDBOX, '--listen', '127.0.0.1:0', ...upstreamArgs()],
      {
        nodeArgs: routerNodeArgs(),
        // No kubeconfig: the router serves from the directory alone, without an echo lease.
        env: { ...process.env, KUBECONFIG: join(tmp, 'no-kubeconfig') },
      },
    );
    procs.router = router;
    log(`router (pid ${router.pid}) at ${router.url}, policy from ${join(tmp, 'policy')}`);
    // Sanity: the same body answers 200 both ways, and the policy is enforced (over-cap → 429).
    const body = chatBody(TRAFFIC_MAX_TOKENS);
    const d = await oneRequest(stub.url, body);
    const r = await oneRequest(router.url, body);
    const over = await oneRequest(router.url, chatBody(REALISTIC_CAP * 2));
    run.sanity = {
      direct: d.status,
      router: r.status,
      overCap: over.status,
      directBytes: d.text.length,
      routerBytes: r.text.length,
      overCapBody: over.text.slice(0, 300),
    };
    run.raw.sanity = run.sanity;
    if (d.status !== 200 || r.status !== 200)
      throw new Error(`sanity: expected 200 direct and through the router, got ${d.status} / ${r.status}: ${r.text.slice(0, 200)}`);
    if (over.status !== 429)
      throw new Error(`sanity: the policy is not enforced: max_tokens ${REALISTIC_CAP * 2} answered ${over.status}, expected 429`);
    if (peers.includes('proxy') && (phases.has('latency') || phases.has('throughput'))) {
      const proxy = await startChild('proxy', [SELF, '--proxy', stub.url, ...(procs.anthropicStub ? [procs.anthropicStub.url] : [])], {
        nodeArgs: splitArgs(process.env.BENCH_PROXY_NODE_ARGS),
      });
      procs.proxy = proxy;
      const pr = await oneRequest(proxy.url, body);
      if (pr.status !== 200 || pr.text.length !== d.text.length)
        throw new Error(`sanity: the pass-through proxy answered ${pr.status} with ${pr.text.length} bytes`);
      log(`node:http pass-through proxy (pid ${proxy.pid}) at ${proxy.url}`);
    }
    const dataPhases = phases.has('latency') || phases.has('throughput') || phases.has('ttfb');
    if (peers.includes('nginx') && dataPhases) {
      const nginx = await startNginx(tmp, stub.url, procs.anthropicStub?.url);
      procs.nginx = nginx;
      const nr = await oneRequest(nginx.url, body);
      if (nr.status !== 200 || nr.text.length !== d.text.length)
        throw new Error(`sanity: nginx answered ${nr.status} with ${nr.text.length} bytes`);
      log(`nginx ${need(run.nginxBin, 'nginx').version} (pid ${nginx.pid}) at ${nginx.url}`);
    }
    if (peers.includes('portkey') && dataPhases) {
      const portkeyPkg = need(run.portkeyPkg, 'the Portkey gateway');
      const portkey = await startPortkey(portkeyPkg.script);
      procs.portkey = portkey;
      const kr = await oneRequest(portkey.url, body, portkeyHeaders(stub.url));
      if (kr.status !== 200) throw new Error(`sanity: the Portkey gateway answered ${kr.status}: ${kr.text.slice(0, 300)}`);
      log(`Portkey gateway ${portkeyPkg.version} (pid ${portkey.pid}) at ${portkey.url}`);
    }
    if (peers.includes('bare') && (phases.has('latency') || phases.has('throughput'))) {
      // The same router with an empty policy directory: no InferencePolicy, so no floor (the
      // response is relayed as it streams, only parsed at the end for usage).
      mkdirSync(join(tmp, 'empty-policy'));
      const bare = await startChild(
        'router (no policy)',
        [KARS_BIN, 'router', '--policy-dir', join(tmp, 'empty-policy'), '--sandbox', SANDBOX, '--listen', '127.0.0.1:0', ...upstreamArgs()],
        {
          nodeArgs: routerNodeArgs(),
          env: { ...process.env, KUBECONFIG: join(tmp, 'no-kubeconfig') },
        },
      );
      procs.bare = bare;
      const br = await oneRequest(bare.url, chatBody(REALISTIC_CAP * 2));
      if (br.status !== 200) throw new Error(`sanity: the router without a policy answered ${br.status}: ${br.text.slice(0, 200)}`);
      log(`router without a policy (pid ${bare.pid}) at ${bare.url}`);
    }
    procs.loadgen = startLoadgen();
  }

  // Sanity for the other APIs (issue 20): 200 direct and through the router, the cap enforced
  // by the router; a peer that cannot carry an API (nginx, the proxy, Portkey) is left out of
  // that API's rows with the reason, as the ttfb phase does for chat.
  const apiSkipped = Object.fromEntries(cfg.apis.map((n) => [n, {}])) as ApiSkipped;
  const stubOf = (upstream: 'openai' | 'anthropic'): string =>
    upstream === 'anthropic' ? need(procs.anthropicStub, 'the Anthropic stub').url : need(procs.stub, 'the stub').url;
  if (needDataPlane && apiPhases)
    for (const name of cfg.apis.filter((n) => n !== 'chat')) {
      const a = APIS[name];
      const dir = join(tmp, `policy-${name}`);
      new KubeletMount(join(dir, 'inference')).write(run.compiled(REALISTIC_CAP, name).body);
      const apiRouter = await startChild(
        `router (${a.label})`,
        [KARS_BIN, 'router', '--policy-dir', dir, '--sandbox', SANDBOX, '--listen', '127.0.0.1:0', ...upstreamArgs()],
        { nodeArgs: routerNodeArgs(), env: { ...process.env, KUBECONFIG: join(tmp, 'no-kubeconfig') } },
      );
      procs.apiRouters[name] = apiRouter;
      log(`router for ${a.label} (pid ${apiRouter.pid}) at ${apiRouter.url}, its policy without the floor`);
      const b = a.body(TRAFFIC_MAX_TOKENS);
      const d = await oneRequest(stubOf(a.upstream), b, {}, a);
      const r = await oneRequest(apiRouter.url, b, {}, a);
      const over = await oneRequest(apiRouter.url, a.body(REALISTIC_CAP * 2), {}, a);
      need(run.sanity, 'the sanity check')[name] = {
        direct: d.status,
        router: r.status,
        overCap: over.status,
        routerBody: r.text.slice(0, 300),
        overCapBody: over.text.slice(0, 300),
      };
      if (d.status !== 200 || r.status !== 200)
        throw new Error(
          `sanity ${a.label}: expected 200 direct and through the router on ${a.path}, got ${d.status} / ${r.status}: ${r.text.slice(0, 200)} (issue 20 brings the router's ${a.path} route${a.upstream === 'anthropic' ? ' and --upstream anthropic=URL' : ''}; BENCH_APIS=chat measures chat alone)`,
        );
      if (over.status !== 429)
        throw new Error(
          `sanity ${a.label}: the policy is not enforced: a limit of ${REALISTIC_CAP * 2} answered ${over.status}, expected 429: ${over.text.slice(0, 200)}`,
        );
      for (const peer of peers.filter((p) => p !== 'direct' && p !== 'router')) {
        const handle = { proxy: procs.proxy, nginx: procs.nginx, bare: procs.bare, portkey: procs.portkey }[peer];
        if (!handle) continue;
        const headers = peer === 'portkey' ? portkeyHeaders(stubOf(a.upstream), a.upstream) : {};
        const pr = await oneRequest(handle.url, b, headers, a).catch((e: unknown) => ({ status: 0, text: errMsg(e) }));
        if (pr.status !== 200) {
          apiSkipped[name][peer] = `answered ${pr.status}`;
          log(`${a.label}: leaving ${peer} out (it answered ${pr.status}: ${pr.text.slice(0, 120)})`);
        }
      }
    }
  return { mount, apiSkipped };
}
