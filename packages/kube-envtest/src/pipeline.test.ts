// The kars pipeline on a real kube-apiserver (issue 18 item 3), with the credentials the manifests
// grant: `kubectl kustomize deploy/base` and `deploy/examples/sandbox-router` are applied
// server-side as admin (the cluster operator; their Deployments stay without pods: no kubelet), then
// the real `kars controller` runs with a TokenRequest token of ServiceAccount kars-system/kars-controller
// and the real `kars router` with one of sandbox-research-agent/kars-router, each with the env its
// Deployment sets (POD_NAMESPACE, POD_NAME, POD_UID, leader election, watch knobs), in front of
// `kars stub openai` and `kars stub mcp`. The admin kubeconfig does only what an operator does.
//
// All four kinds reach Ready only on the router's echo, and an edit of each is enforced by real
// requests through the router: the InferencePolicy cap (chat), the KarsSandbox baseline egress
// (CONNECT through the router's egress proxy), the ToolPolicy deny rule (MCP tools/call through the
// gateway) and an EgressApproval (a host reachable only while approved). An invalid InferencePolicy
// goes Degraded and keeps the last good ConfigMap. Deletion is finalized by the controller (the
// audit log shows its ServiceAccount deleting the ConfigMap), and with the controller stopped and a
// finalizer removed by hand, kube-controller-manager's garbage collector removes the compiled
// ConfigMaps through their ownerReferences (the audit log shows generic-garbage-collector), with the
// OwnerReferencesPermissionEnforcement admission plugin on. Skips (naming `npm run kube:build`)
// without the binaries.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startTcpEchoServer, until } from '@kars/kube-core/testing';
import { expectedEgressDigest } from '@kars/policy-compiler';
import { findKubeBinaries, findKubectlBinary } from './binaries.js';
import { startControlPlane } from './control-plane.js';
import type { ControlPlane } from './control-plane.js';
import { serviceAccountToken, writeTokenKubeconfig } from './credentials.js';
import { kubectl, processesMentioning } from './testing.js';
import { readPins } from './versions.js';
import { startKars, stopKars } from './kars-process.js';
import type { KarsChild as Child } from './kars-process.js';

const repo = (p: string): string => fileURLToPath(new URL(`../../../${p}`, import.meta.url));
const WAIT = { timeoutMs: 90_000, everyMs: 200 };
// What deploy/base and deploy/examples/sandbox-router name.
const CONTROLLER_NS = 'kars-system';
const CONTROLLER_SA = 'kars-controller';
const NS = 'sandbox-research-agent';
const ROUTER_SA = 'kars-router';
const SANDBOX = 'research-agent';
const POLICY = 'research-budget';
const TOOLS = 'research-tools';
const APPROVAL = 'research-agent-local';
const API = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
const CM = (name: string): string => `/api/v1/namespaces/${NS}/configmaps/${name}`;
const IP_CM = `inferencepolicy-${POLICY}-profile`;
const TP_CM = `toolpolicy-${TOOLS}-profile`;
const EGRESS_CM = `kars-${SANDBOX}-egress-approvals`;
const CRDS = ['inferencepolicies', 'toolpolicies', 'egressapprovals', 'karssandboxes'].map((n) => `crd/${n}.kars.azure.com`);
const GC_USER = 'system:serviceaccount:kube-system:generic-garbage-collector';
const CONTROLLER_USER = `system:serviceaccount:${CONTROLLER_NS}:${CONTROLLER_SA}`;

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}
interface Obj {
  metadata: {
    uid?: string;
    generation?: number;
    finalizers?: string[];
    deletionTimestamp?: string;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{
      apiVersion: string;
      kind: string;
      name: string;
      uid: string;
      controller?: boolean;
      blockOwnerDeletion?: boolean;
    }>;
  };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  status?: {
    phase?: string;
    observedGeneration?: number;
    compiledDigest?: string | null;
    loadedDigest?: string | null;
    agtProfileDigest?: string | null;
    mergedDigest?: string | null;
    conditions?: Condition[];
    routers?: Array<{ instance: string; loaded?: Record<string, string | null> }>;
  };
}

/** `CONNECT target` through the egress proxy at `proxyUrl`: the status, and for a 200 what an echo round trip returned. */
function connectVia(proxyUrl: string, target: string): Promise<{ status: number; echoed?: string; body: string }> {
  const u = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    let buf = '';
    let status = 0;
    let head = -1;
    s.on('error', reject);
    s.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      if (head < 0) {
        head = buf.indexOf('\r\n\r\n');
        if (head < 0) return;
        status = Number(buf.slice(9, 12));
        if (status === 200) s.write('ping');
      }
      if (status === 200 && buf.length >= head + 4 + 4) {
        s.destroy();
        resolve({ status, echoed: buf.slice(head + 4), body: '' });
      }
    });
    s.on('close', () => resolve({ status, body: head >= 0 ? buf.slice(head + 4) : buf }));
  });
}

for (const pin of readPins().kubernetes) {
  const found = findKubeBinaries(pin.minor);
  const bin = findKubectlBinary();
  const skip = !found.binaries ? found.reason : !bin ? 'no kubectl on PATH' : false;
  describe(`the kars pipeline on kube-apiserver ${pin.version}, with the manifests' ServiceAccounts`, { skip }, () => {
    let cp: ControlPlane;
    let dir: string;
    const children: Child[] = [];
    let controller: Child;
    let routerUrl = '';
    let egressUrl = '';
    const echoes: Array<Awaited<ReturnType<typeof startTcpEchoServer>>> = [];
    /** kubectl as the cluster operator (admin). */
    const k = (args: string[], input?: string): ReturnType<typeof kubectl> =>
      kubectl(bin!, cp.kubeconfig, args, input === undefined ? {} : { input });
    const ok = async (args: string[], input?: string): Promise<string> => {
      const r = await k(args, input);
      assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const logs = (): string => children.map((c) => `--- kars ${c.name}:\n${c.output.join('').slice(-3000)}`).join('\n');
    /** GET as admin (reads poll often; one HTTP request is cheaper than a kubectl process). */
    const get = async (path: string): Promise<Obj | undefined> => {
      const r = await cp.request(path);
      if (r.status === 404) return undefined;
      assert.equal(r.status, 200, `GET ${path}: ${r.body}`);
      return JSON.parse(r.body) as Obj;
    };
    const wait = <T>(what: string, fn: () => Promise<T | undefined | false>): Promise<T> =>
      until(what, fn, WAIT).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${logs()}`);
      });
    const cond = (o: Obj | undefined, type: string): Condition | undefined => o?.status?.conditions?.find((c) => c.type === type);
    /** A policy whose Ready=True at `generation` with `reason`, and whose router echo equals the compiled digest. */
    const readyAt = (plural: string, name: string, generation: number, reason: string): Promise<Obj> =>
      wait(`${plural}/${name} Ready/${reason} at generation ${generation}`, async () => {
        const p = await get(`${API}/${plural}/${name}`);
        const r = cond(p, 'Ready');
        return p?.status?.observedGeneration === generation && r?.status === 'True' && r.reason === reason ? p : undefined;
      });
    const chat = async (maxTokens: number): Promise<{ status: number; body: string }> => {
      const r = await fetch(`${routerUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'client-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: maxTokens }),
      });
      return { status: r.status, body: await r.text() };
    };
    const callTool = async (tool: string): Promise<{ error?: { message: string }; result?: { content?: Array<{ text?: string }> } }> => {
      const r = await fetch(`${routerUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: { q: 1 } } }),
      });
      assert.equal(r.status, 200);
      return (await r.json()) as { error?: { message: string }; result?: { content?: Array<{ text?: string }> } };
    };
    /** The user that DELETEd ConfigMap `name` in the audit log (undefined: none yet). */
    const deleterOf = (name: string): string[] =>
      cp
        .auditEvents()
        .filter(
          (e) =>
            e.verb === 'delete' &&
            e.stage === 'ResponseComplete' &&
            e.objectRef?.resource === 'configmaps' &&
            e.objectRef.namespace === NS &&
            e.objectRef.name === name &&
            e.responseStatus?.code === 200,
        )
        .map((e) => e.user.username);

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'kars-pipeline-'));
      // OwnerReferencesPermissionEnforcement (off by default, on in some distributions): an
      // ownerReference the controller sets must pass it with the controller's own RBAC.
      // The CRDs go in before kube-controller-manager starts, so its garbage collector watches the
      // kars kinds from its first discovery (else only from its next 30 s resync; deploy/base
      // applies them again below, unchanged).
      cp = await startControlPlane({
        binaries: found.binaries!,
        apiserverArgs: ['--enable-admission-plugins=OwnerReferencesPermissionEnforcement'],
        beforeControllers: async ({ kubeconfig }) => {
          const crds = await kubectl(bin!, kubeconfig, ['apply', '--server-side', '-f', repo('deploy/crds/all.yaml')]);
          assert.equal(crds.code, 0, crds.stderr);
          const w = await kubectl(bin!, kubeconfig, ['wait', '--for=condition=Established', '--timeout=90s', ...CRDS]);
          assert.equal(w.code, 0, w.stderr);
        },
      });
      echoes.push(await startTcpEchoServer(), await startTcpEchoServer(), await startTcpEchoServer());
    });
    after(async () => {
      await Promise.all(children.map((c) => stopKars(c)));
      for (const c of children) assert.ok(c.proc.exitCode !== null || c.proc.signalCode !== null, `kars ${c.name} has exited`);
      await Promise.all(echoes.map((e) => e.close()));
      await cp?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
      if (cp) assert.deepEqual(processesMentioning(cp.dir), [], 'no process of this control plane (or a kars child) is left running');
    });

    it('deploy/base and deploy/examples/sandbox-router apply server-side (CRDs Established, ServiceAccounts and RBAC in place)', async () => {
      // Everything as rendered, the Deployments included: without a kubelet (nor a ReplicaSet
      // controller) they never get pods, which is what this suite replaces with local processes.
      const base = await ok(['kustomize', repo('deploy/base')]);
      await ok(['apply', '--server-side', '-f', '-'], base);
      await ok(['wait', '--for=condition=Established', '--timeout=90s', ...CRDS]);
      const example = await ok(['kustomize', repo('deploy/examples/sandbox-router')]);
      // The OpenAPI of a just-Established CRD can lag a moment (the example holds the KarsSandbox); retry until taken.
      await wait('applying deploy/examples/sandbox-router', async () => {
        const c = await k(['apply', '--server-side', '-f', '-'], example);
        if (c.code !== 0) throw new Error(c.stderr);
        return true;
      });
      assert.ok(await get(`/api/v1/namespaces/${CONTROLLER_NS}/serviceaccounts/${CONTROLLER_SA}`));
      assert.ok(await get(`/api/v1/namespaces/${NS}/serviceaccounts/${ROUTER_SA}`));
      const sb = await get(`${API}/karssandboxes/${SANDBOX}`);
      assert.equal(
        (sb?.spec?.['inferenceRef'] as { name?: string } | undefined)?.name,
        POLICY,
        'the example sandbox binds research-budget',
      );
      await ok(
        ['apply', '--server-side', '-f', '-'],
        [
          'apiVersion: kars.azure.com/v1alpha1',
          'kind: InferencePolicy',
          `metadata: {name: ${POLICY}, namespace: ${NS}}`,
          'spec:',
          `  appliesTo: {sandboxName: ${SANDBOX}}`,
          '  tokenBudget: {perRequestTokens: 1000, dailyTokens: 200000, monthlyTokens: 5000000}',
        ].join('\n'),
      );
    });

    it("the controller and the router run with their ServiceAccounts' tokens; the InferencePolicy is Ready on the router echo", async () => {
      const controllerToken = await serviceAccountToken(cp, CONTROLLER_NS, CONTROLLER_SA);
      const routerToken = await serviceAccountToken(cp, NS, ROUTER_SA);
      const controllerKc = writeTokenKubeconfig(cp, join(dir, 'controller.kubeconfig'), { token: controllerToken.token });
      const routerKc = writeTokenKubeconfig(cp, join(dir, 'router.kubeconfig'), { token: routerToken.token });
      // What the tokens are: the apiserver names each ServiceAccount (and nothing more).
      const who = await cp.request('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
        method: 'POST',
        token: routerToken.token,
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      });
      assert.equal(JSON.parse(who.body).status.userInfo.username, `system:serviceaccount:${NS}:${ROUTER_SA}`);

      const stub = startKars('stub-openai', ['stub', 'openai', '--listen', '127.0.0.1:0']);
      const mcp = startKars('stub-mcp', ['stub', 'mcp', '--listen', '127.0.0.1:0', '--tool', 'get_repo', '--tool', 'delete_repo']);
      children.push(stub, mcp);
      const [upstream, mcpUrl] = await Promise.all([stub.url, mcp.url]);
      const knobs = {
        KARS_WATCH_TIMEOUT_SECS: '200',
        KARS_WATCH_IDLE_TIMEOUT_SECS: '90',
        KARS_HTTP2_PING_INTERVAL_SECS: '10',
        KARS_HTTP2_PING_TIMEOUT_SECS: '5',
      };
      // deploy/base/deployment.yaml's env (the downward API's POD_NAMESPACE and POD_NAME) and args.
      controller = startKars('controller', ['controller', '--kubeconfig', controllerKc, '--metrics-addr', 'disabled'], {
        ...knobs,
        POD_NAMESPACE: CONTROLLER_NS,
        POD_NAME: 'kars-controller-5d9f8b7c4-x2k8q',
        LEADER_ELECTION_ENABLED: 'true',
        LEADER_ELECTION_LEASE_NAME: 'kars-controller',
        KARS_RELIST_INTERVAL_SECS: '600',
      });
      children.push(controller);
      // deploy/examples/sandbox-router/deployment.yaml's router container: its args (listen
      // addresses on free ports, the stubs as upstreams) and the downward API's namespace, name, uid.
      const router = startKars(
        'router',
        [
          'router',
          `--sandbox=${SANDBOX}`,
          `--namespace=${NS}`,
          '--listen=127.0.0.1:0',
          '--egress-listen=127.0.0.1:0',
          `--upstream=${upstream}`,
          `--mcp-upstream=${mcpUrl}`,
          '--kubeconfig',
          routerKc,
        ],
        { ...knobs, POD_NAMESPACE: NS, POD_NAME: `${SANDBOX}-7c9d6f5b8-q4m2z`, POD_UID: randomUUID() },
      );
      children.push(router);
      routerUrl = (await router.url).replace(/\/$/, '');
      egressUrl = (await router.line(/^egress: \S+$/m)).replace(/^egress: /, '');

      const p = await readyAt('inferencepolicies', POLICY, 1, 'RouterEnforcing');
      assert.match(p.status?.compiledDigest ?? '', /^sha256:[0-9a-f]{64}$/);
      assert.equal(p.status?.loadedDigest, p.status?.compiledDigest);
      assert.equal(p.status?.phase, 'Ready');
      assert.ok(p.metadata.finalizers?.length, 'the controller put its finalizer on the policy');
      const cm = await get(CM(IP_CM));
      assert.equal(cm?.metadata.annotations?.['kars.azure.com/inference-policy-digest'], p.status?.compiledDigest);
      assert.equal((await chat(1001)).status, 429);
      assert.equal((await chat(1000)).status, 200);
      // The leader Lease the controller's Role names, held by its POD_NAME.
      const lease = (await get(`/apis/coordination.k8s.io/v1/namespaces/${CONTROLLER_NS}/leases/kars-controller`)) as
        { spec?: { holderIdentity?: string } } | undefined;
      assert.match(lease?.spec?.holderIdentity ?? '', /^kars-controller-5d9f8b7c4-x2k8q-/);
    });

    it('an edit of perRequestTokens is Ready again at the new generation and digest, and the router enforces the new cap', async () => {
      const before = (await get(`${API}/inferencepolicies/${POLICY}`))!;
      await ok(['patch', 'inferencepolicy', POLICY, '-n', NS, '--type=merge', '-p', '{"spec":{"tokenBudget":{"perRequestTokens":100}}}']);
      const generation = (before.metadata.generation ?? 1) + 1;
      const p = await readyAt('inferencepolicies', POLICY, generation, 'RouterEnforcing');
      assert.notEqual(p.status?.compiledDigest, before.status?.compiledDigest);
      assert.equal(p.status?.loadedDigest, p.status?.compiledDigest, 'the router echoed the new digest');
      const over = await chat(101);
      assert.equal(over.status, 429, over.body);
      assert.equal(JSON.parse(over.body).error.code, 'per_request_tokens_exceeded');
      const under = await chat(99);
      assert.equal(under.status, 200, under.body);
      const cm = await get(CM(IP_CM));
      assert.equal(JSON.parse(cm?.data?.['inference-policy.json'] ?? '{}').tokenBudget?.perRequestTokens, 100);
    });

    it('a bundleRef edit (accepted by the schema, refused by the controller) goes Degraded and the ConfigMap keeps its last good content', async () => {
      const good = (await get(`${API}/inferencepolicies/${POLICY}`))!;
      const goodMap = await get(CM(IP_CM));
      const bundle = {
        spec: {
          tokenBudget: null,
          bundleRef: { registry: 'registry.invalid', repository: 'policies/pipe', digest: `sha256:${'a'.repeat(64)}` },
        },
      };
      await ok(['patch', 'inferencepolicy', POLICY, '-n', NS, '--type=merge', '-p', JSON.stringify(bundle)]);
      const generation = (good.metadata.generation ?? 1) + 1;
      const p = await wait(`InferencePolicy Degraded at generation ${generation}`, async () => {
        const x = await get(`${API}/inferencepolicies/${POLICY}`);
        return x?.status?.phase === 'Degraded' && x.status.observedGeneration === generation ? x : undefined;
      });
      assert.equal(cond(p, 'Degraded')?.status, 'True');
      assert.equal(cond(p, 'Degraded')?.reason, 'InvalidRef');
      assert.equal(cond(p, 'Ready')?.status, 'False');
      assert.deepEqual(await get(CM(IP_CM)), goodMap, 'the last good ConfigMap is kept as it was');
      const over = await chat(101);
      assert.equal(over.status, 429, 'the router keeps enforcing the last good cap');
      assert.equal((await chat(99)).status, 200);
    });

    it("a KarsSandbox edit (baseline egress) is Running at the new generation with the router's echo of the new allowlist, and the proxy enforces it", async () => {
      const target = `127.0.0.1:${echoes[0]!.port}`;
      const refused = await connectVia(egressUrl, target);
      assert.equal(refused.status, 403, 'not in the example baseline (api.github.com) yet');
      const before = (await get(`${API}/karssandboxes/${SANDBOX}`))!;
      // The operator adds the local host to the baseline and turns governance on (the ToolPolicy below).
      const spec = {
        spec: {
          networkPolicy: { allowedEndpoints: [{ host: 'api.github.com' }, { host: '127.0.0.1', port: echoes[0]!.port }] },
          governance: { enabled: true, toolPolicyRef: { name: TOOLS } },
        },
      };
      await ok(['patch', 'karssandbox', SANDBOX, '-n', NS, '--type=merge', '-p', JSON.stringify(spec)]);
      const generation = (before.metadata.generation ?? 1) + 1;
      const edited = (await get(`${API}/karssandboxes/${SANDBOX}`))!;
      assert.equal(edited.metadata.generation, generation);
      const want = expectedEgressDigest(edited as Parameters<typeof expectedEgressDigest>[0], [], Date.now());
      // Ready for a KarsSandbox: Running (a live router echo) at its generation, the router reporting the new allowlist loaded.
      const sb = await wait(`KarsSandbox Running at generation ${generation} with the new allowlist echoed`, async () => {
        const s = await get(`${API}/karssandboxes/${SANDBOX}`);
        const r = s?.status?.routers?.find((x) => x.loaded?.['EgressApproval'] === want);
        return s?.status?.phase === 'Running' && s.status.observedGeneration === generation && r ? s : undefined;
      });
      const ip = await get(`${API}/inferencepolicies/${POLICY}`);
      assert.equal(sb.status?.routers?.[0]?.loaded?.['InferencePolicy'], ip?.status?.compiledDigest ?? undefined);
      const through = await connectVia(egressUrl, target);
      assert.equal(through.status, 200, through.body);
      assert.equal(through.echoed, 'ping', 'the tunnel reaches the baseline host');
      assert.equal((await connectVia(egressUrl, `127.0.0.1:${echoes[1]!.port}`)).status, 403, 'another port stays closed');
    });

    it('a ToolPolicy is Ready on the router echo (loadedDigest == compiledDigest), its deny rule is enforced on MCP calls, and an edit moves it', async () => {
      const profile = (deny: string): string => `default: allow\nrules:\n  - deny: ${deny}\n    reason: not from a sandbox\n`;
      const tp = [
        'apiVersion: kars.azure.com/v1alpha1',
        'kind: ToolPolicy',
        `metadata: {name: ${TOOLS}, namespace: ${NS}}`,
        'spec:',
        '  appliesTo: {tool: "*"}',
        '  agtProfile:',
        `    inline: ${JSON.stringify(profile('delete_repo'))}`,
      ].join('\n');
      await ok(['apply', '--server-side', '-f', '-'], tp);
      const p = await readyAt('toolpolicies', TOOLS, 1, 'RouterEnforcing');
      assert.match(p.status?.compiledDigest ?? '', /^sha256:[0-9a-f]{64}$/);
      assert.equal(p.status?.loadedDigest, p.status?.compiledDigest, 'the router echoed the compiled AGT profile');
      assert.equal(p.status?.phase, 'Ready');
      const denied = await callTool('delete_repo');
      assert.match(denied.error?.message ?? '', /not from a sandbox/, JSON.stringify(denied));
      const allowed = await callTool('get_repo');
      assert.equal(allowed.error, undefined, JSON.stringify(allowed));
      assert.match(allowed.result?.content?.[0]?.text ?? '', /^called get_repo/, 'the allowed call reached the MCP server');

      await ok([
        'patch',
        'toolpolicy',
        TOOLS,
        '-n',
        NS,
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { agtProfile: { inline: profile('get_repo') } } }),
      ]);
      const edited = await readyAt('toolpolicies', TOOLS, 2, 'RouterEnforcing');
      assert.notEqual(edited.status?.compiledDigest, p.status?.compiledDigest);
      assert.equal(edited.status?.loadedDigest, edited.status?.compiledDigest);
      assert.match((await callTool('get_repo')).error?.message ?? '', /not from a sandbox/, 'the edited rule denies get_repo');
      assert.match((await callTool('delete_repo')).result?.content?.[0]?.text ?? '', /^called delete_repo/, 'and lets delete_repo through');
    });

    it('an EgressApproval is Active on the router echo (loadedDigest == mergedDigest); its host is reachable only while approved; an edit moves it', async () => {
      const [a, b] = [`127.0.0.1:${echoes[1]!.port}`, `127.0.0.1:${echoes[2]!.port}`];
      assert.equal((await connectVia(egressUrl, a)).status, 403);
      const approval = (port: number): string =>
        [
          'apiVersion: kars.azure.com/v1alpha1',
          'kind: EgressApproval',
          `metadata: {name: ${APPROVAL}, namespace: ${NS}}`,
          'spec:',
          `  sandbox: ${SANDBOX}`,
          `  hosts: [{host: 127.0.0.1, port: ${port}}]`,
          '  reason: reach the local docs mirror',
          '  ttl: PT1H',
        ].join('\n');
      await ok(['apply', '--server-side', '-f', '-'], approval(echoes[1]!.port));
      const first = await readyAt('egressapprovals', APPROVAL, 1, 'RouterConfirmed');
      assert.equal(first.status?.phase, 'Active');
      assert.match(first.status?.mergedDigest ?? '', /^sha256:[0-9a-f]{64}$/);
      assert.equal(first.status?.loadedDigest, first.status?.mergedDigest);
      const open = await connectVia(egressUrl, a);
      assert.equal(open.status, 200, open.body);
      assert.equal(open.echoed, 'ping');
      assert.equal((await connectVia(egressUrl, b)).status, 403);

      await ok(['apply', '--server-side', '-f', '-'], approval(echoes[2]!.port));
      const second = await readyAt('egressapprovals', APPROVAL, 2, 'RouterConfirmed');
      assert.notEqual(second.status?.mergedDigest, first.status?.mergedDigest);
      assert.equal(second.status?.loadedDigest, second.status?.mergedDigest);
      assert.equal((await connectVia(egressUrl, a)).status, 403, 'the host the edit dropped is closed again');
      assert.equal((await connectVia(egressUrl, b)).status, 200, 'the new host is open');
    });

    it('IPv6 literals (ADR 0045): kube-apiserver admits a bare one and refuses brackets and zone ids; an approval for ::1 the baseline lists is Active and CONNECT [::1]:port tunnels', async () => {
      for (const [host, admitted] of [
        ['2001:db8::1', true],
        ['::ffff:10.0.0.1', true],
        ['[::1]', false],
        ['fe80::1%eth0', false],
        ['1:2', false],
      ] as const) {
        const r = await k(
          ['apply', '--server-side', '--dry-run=server', '-f', '-'],
          JSON.stringify({
            apiVersion: 'kars.azure.com/v1alpha1',
            kind: 'KarsSandbox',
            metadata: { name: 'v6-check', namespace: NS },
            spec: { networkPolicy: { allowedEndpoints: [{ host, port: 443 }] } },
          }),
        );
        assert.equal(r.code === 0, admitted, `${host}: ${r.stderr}`);
        if (!admitted) assert.match(r.stderr, /spec\.networkPolicy\.allowedEndpoints\[0\]\.host/);
      }
      const v6 = await startTcpEchoServer('::1');
      echoes.push(v6);
      const sb = (await get(`${API}/karssandboxes/${SANDBOX}`))!;
      const endpoints = [...((sb.spec as { networkPolicy?: { allowedEndpoints?: unknown[] } }).networkPolicy?.allowedEndpoints ?? [])];
      await ok([
        'patch',
        'karssandbox',
        SANDBOX,
        '-n',
        NS,
        '--type=merge',
        '-p',
        JSON.stringify({ spec: { networkPolicy: { allowedEndpoints: [...endpoints, { host: '::1', port: 1 }] } } }),
      ]);
      const name = `${APPROVAL}-v6`;
      await ok(
        ['apply', '--server-side', '-f', '-'],
        JSON.stringify({
          apiVersion: 'kars.azure.com/v1alpha1',
          kind: 'EgressApproval',
          metadata: { name, namespace: NS },
          spec: { sandbox: SANDBOX, hosts: [{ host: '0:0:0:0:0:0:0:1', port: v6.port }], reason: 'IPv6 loopback', ttl: 'PT1H' },
        }),
      );
      const active = await readyAt('egressapprovals', name, 1, 'RouterConfirmed');
      assert.equal(active.status?.phase, 'Active');
      const through = await connectVia(egressUrl, `[::1]:${v6.port}`);
      assert.equal(through.status, 200, through.body);
      assert.equal(through.echoed, 'ping');
      // Gone again before the garbage-collector test, which needs the approvals ConfigMap's other owner only.
      await ok(['delete', 'egressapproval', name, '-n', NS, '--wait=true']);
      await wait('the IPv6 approval is gone', async () => (await get(`${API}/egressapprovals/${name}`)) === undefined);
      await wait(
        '[::1] closed once the router has dropped the approval',
        async () => (await connectVia(egressUrl, `[::1]:${v6.port}`)).status === 403,
      );
    });

    it("a deleted InferencePolicy is finalized, and its ConfigMap is deleted by the controller's ServiceAccount (audit log)", async () => {
      const d = await k(['delete', 'inferencepolicy', POLICY, '-n', NS, '--wait=true', '--timeout=90s']);
      assert.equal(d.code, 0, d.stderr + logs());
      assert.equal(await get(`${API}/inferencepolicies/${POLICY}`), undefined);
      await wait('the compiled ConfigMap is removed', async () => (await get(CM(IP_CM))) === undefined);
      assert.deepEqual(deleterOf(IP_CM), [CONTROLLER_USER]);
    });

    it("with the controller stopped and the finalizers removed by hand, the real garbage collector removes the ToolPolicy's and the EgressApproval's ConfigMaps through their ownerReferences", async () => {
      const tp = (await get(`${API}/toolpolicies/${TOOLS}`))!;
      const ea = (await get(`${API}/egressapprovals/${APPROVAL}`))!;
      const tpMap = (await get(CM(TP_CM)))!;
      const eaMap = (await get(CM(EGRESS_CM)))!;
      assert.deepEqual(
        tpMap.metadata.ownerReferences?.map((o) => ({ ...o })),
        [{ apiVersion: 'kars.azure.com/v1alpha1', kind: 'ToolPolicy', name: TOOLS, uid: tp.metadata.uid, controller: true }],
      );
      assert.deepEqual(
        eaMap.metadata.ownerReferences?.map((o) => ({ ...o })),
        [{ apiVersion: 'kars.azure.com/v1alpha1', kind: 'EgressApproval', name: APPROVAL, uid: ea.metadata.uid }],
      );
      await stopKars(controller);
      for (const [kind, name] of [
        ['toolpolicy', TOOLS],
        ['egressapproval', APPROVAL],
      ] as const) {
        await ok(['delete', kind, name, '-n', NS, '--wait=false']);
        // What an operator does when no controller will ever come back: drop the finalizer.
        await ok(['patch', kind, name, '-n', NS, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
      }
      await wait(
        'the garbage collector removes both ConfigMaps',
        async () => (await get(CM(TP_CM))) === undefined && (await get(CM(EGRESS_CM))) === undefined,
      );
      assert.deepEqual(deleterOf(TP_CM), [GC_USER]);
      assert.deepEqual(deleterOf(EGRESS_CM), [GC_USER]);
      // The router loses the stale approval with its ConfigMap: the host is closed again.
      await wait(
        'the router closes the host of the removed approval',
        async () => (await connectVia(egressUrl, `127.0.0.1:${echoes[2]!.port}`)).status === 403,
      );
    });
  });
}
