/**
 * One egress rule (issue 22 item 3, ADR 0045), end to end: kars apiserver, the kars controller and
 * a real router with its egress proxy. For each case the EgressApproval's status (Active or not)
 * and the proxy's answer to a real CONNECT agree:
 * - the case: a baseline of `{host: localhost, port: 1}` lets an approval for
 *   `localhost:<port>` go Active, and the proxy then tunnels to it; once the baseline no longer
 *   lists localhost, the approval is refused (Pending) and so is the CONNECT;
 * - a baseline that lists the name does not let an approval open the address (`127.0.0.1`), nor
 *   the other way round: both are refused by the controller (Pending, with the reason) and by the
 *   proxy (403 egress_not_allowed);
 * - IPv6 literals: a baseline may list `::1`, an approval may open `::1` (written in another
 *   spelling, too) when the baseline lists it, and the proxy tunnels `CONNECT [::1]:<port>`.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { KubeClient } from '@kars/kube-client';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { createCrds, startTestServer } from '@kars/apiserver/testing';
import type { TestServer } from '@kars/apiserver/testing';
import { startTcpEchoServer } from '@kars/kube-core/testing';
import type { TcpEchoServer } from '@kars/kube-core/testing';
import { allCrds } from '@kars/policy-api';
import { PolicyController } from '@kars/policy-controller';
import { pino } from 'pino';
import { startRouter } from './server.js';
import type { RunningRouter } from './server.js';
import { startOpenAIStub } from './stubs/openai.js';
import type { OpenAIStub } from './stubs/openai.js';
import { clientFor, fastWatchConfig, until } from '@kars/kube-runtime/testing';

const NS = 'egress-rule';
const API = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}`;
const cfg = fastWatchConfig({ pingMs: 1000, idleMs: 5000 });
const silent = pino({ level: 'silent' });

interface Answer {
  status: number;
  code: string | undefined;
  body: string;
  /** What came back through the tunnel after sending "ping" (only when status is 200). */
  echoed?: string;
}

/** `CONNECT target` through the proxy at `proxyUrl`; on 200, send "ping" and read what comes back. */
function connectVia(proxyUrl: string, target: string): Promise<Answer> {
  const u = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname, () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    let buf = '';
    let head: { status: number; code: string | undefined; rest: number } | undefined;
    s.on('error', reject);
    s.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      if (head === undefined) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const code = /\r\nx-kars-decision-code: ([^\r]*)/i.exec(buf.slice(0, end))?.[1];
        head = { status: Number(buf.slice(9, 12)), code, rest: end + 4 };
        if (head.status === 200) s.write('ping');
      }
      if (head.status === 200 && buf.length - head.rest >= 4) {
        resolve({ status: 200, code: head.code, body: '', echoed: buf.slice(head.rest) });
        s.destroy();
      }
    });
    s.on('close', () => {
      if (head !== undefined && head.status !== 200) resolve({ status: head.status, code: head.code, body: buf.slice(head.rest) });
      else if (head === undefined) reject(new Error(`proxy closed without an answer: ${JSON.stringify(buf)}`));
    });
  });
}

describe('one egress rule: an EgressApproval is Active exactly when the router admits it (ADR 0045)', { timeout: 120_000 }, () => {
  let ts: TestServer;
  let openai: OpenAIStub;
  let client: KubeClient;
  let v4: TcpEchoServer;
  let v6: TcpEchoServer;
  const ac = new AbortController();
  let controllerRun: Promise<void>;
  const routers: Array<{ router: RunningRouter; stop: AbortController }> = [];

  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, ...allCrds());
    await ts.client.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    openai = await startOpenAIStub();
    v4 = await startTcpEchoServer('127.0.0.1');
    v6 = await startTcpEchoServer('::1');
    client = clientFor(ts.server.kubeconfigPath, cfg);
    const controller = new PolicyController({
      client,
      config: cfg,
      metrics: new RuntimeMetrics(),
      log: silent,
      leaderElection: { enabled: false, namespace: NS, name: 'c', identity: 'c' },
      env: {},
    });
    controllerRun = controller.run(ac.signal);
  });

  after(async () => {
    ac.abort();
    for (const r of routers) r.stop.abort();
    await Promise.all([controllerRun, ...routers.map((r) => r.router.done)]);
    client.close();
    await Promise.all([openai.close(), v4.close(), v6.close()]);
    await ts.close();
  });

  /** A sandbox with this baseline and a router (with an egress proxy) for it; resolves once the sandbox is Running. */
  async function sandbox(name: string, allowedEndpoints: Array<{ host: string; port?: number }>): Promise<RunningRouter> {
    const created = await ts.client.post(`${API}/karssandboxes`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'KarsSandbox',
      metadata: { name },
      spec: { networkPolicy: { allowedEndpoints } },
    });
    assert.equal(created.status, 201, created.text);
    const stop = new AbortController();
    const router = await startRouter(
      {
        sandbox: name,
        namespace: NS,
        listen: '127.0.0.1:0',
        egressListen: '127.0.0.1:0',
        upstream: openai.url,
        source: { kind: 'api', client, config: cfg },
        instance: `${name}-0`,
        metrics: new RuntimeMetrics(),
        log: silent,
      },
      stop.signal,
    );
    routers.push({ router, stop });
    await until(
      `sandbox ${name} Running`,
      async () => (await ts.client.get(`${API}/karssandboxes/${name}`)).body.status?.phase === 'Running',
    );
    return router;
  }

  async function approve(name: string, sb: string, hosts: Array<{ host: string; port: number }>): Promise<void> {
    const created = await ts.client.post(`${API}/egressapprovals`, {
      apiVersion: 'kars.azure.com/v1alpha1',
      kind: 'EgressApproval',
      metadata: { name },
      spec: { sandbox: sb, hosts, reason: 'issue 22 item 3', ttl: 'PT1H' },
    });
    assert.equal(created.status, 201, created.text);
  }

  type Status = { phase?: string; conditions?: Array<{ type: string; status: string; reason: string; message: string }> };
  const statusOf = async (name: string): Promise<Status> =>
    ((await ts.client.get(`${API}/egressapprovals/${name}`)).body.status ?? {}) as Status;

  /** Wait until the approval is Active (router confirmed). */
  const active = (name: string): Promise<Status> =>
    until(`${name} Active`, async () => {
      const s = await statusOf(name);
      return s.phase === 'Active' ? s : undefined;
    });

  /** Wait until the controller has refused the approval (Pending, Degraded with the reason). */
  const refused = (name: string): Promise<Status> =>
    until(`${name} refused`, async () => {
      const s = await statusOf(name);
      return s.phase === 'Pending' && s.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True') ? s : undefined;
    });

  it("the issue's case: baseline {localhost, port 1}; an approval for localhost:<port> is Active and the proxy tunnels to it", async () => {
    const r = await sandbox('sb-name', [{ host: 'localhost', port: 1 }]);
    // Before any approval the proxy refuses, and the sandbox's baseline port 1 is all that localhost may use.
    assert.equal((await connectVia(r.egressUrl!, `localhost:${v4.port}`)).code, 'egress_not_allowed');
    await approve('ea-name', 'sb-name', [{ host: 'LocalHost.', port: v4.port }]);
    const s = await active('ea-name');
    assert.equal(s.phase, 'Active');
    const a = await connectVia(r.egressUrl!, `localhost:${v4.port}`);
    assert.deepEqual({ status: a.status, echoed: a.echoed }, { status: 200, echoed: 'ping' }, a.body);

    // The operator drops localhost from the baseline: the approval is no longer Active, and the proxy refuses.
    const patched = await ts.client.patch(
      `${API}/karssandboxes/sb-name`,
      { spec: { networkPolicy: { allowedEndpoints: [{ host: 'example.org', port: 1 }] } } },
      'merge',
    );
    assert.equal(patched.status, 200, patched.text);
    const s2 = await refused('ea-name');
    assert.match(s2.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /localhost names the local machine/);
    const closed = await until('the proxy refuses localhost once the baseline no longer lists it', async () => {
      const c = await connectVia(r.egressUrl!, `localhost:${v4.port}`);
      return c.status === 403 ? c : undefined;
    });
    assert.equal(closed.code, 'egress_not_allowed');
  });

  it('a baseline that lists the name opens no address, and one that lists the address opens no name: refused by both', async () => {
    const byName = await sandbox('sb-only-name', [{ host: 'localhost', port: 1 }]);
    await approve('ea-address', 'sb-only-name', [{ host: '127.0.0.1', port: v4.port }]);
    const s1 = await refused('ea-address');
    assert.match(s1.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /127\.0\.0\.1 is in the loopback range/);
    const a1 = await connectVia(byName.egressUrl!, `127.0.0.1:${v4.port}`);
    assert.deepEqual({ status: a1.status, code: a1.code }, { status: 403, code: 'egress_not_allowed' });

    const byAddress = await sandbox('sb-only-address', [{ host: '127.0.0.1', port: 1 }]);
    await approve('ea-localhost', 'sb-only-address', [{ host: 'localhost', port: v4.port }]);
    const s2 = await refused('ea-localhost');
    assert.match(s2.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /localhost names the local machine/);
    const a2 = await connectVia(byAddress.egressUrl!, `localhost:${v4.port}`);
    assert.deepEqual({ status: a2.status, code: a2.code }, { status: 403, code: 'egress_not_allowed' });
  });

  it('IPv6 literals end to end: a baseline lists ::1, an approval opens it in another spelling, CONNECT [::1]:<port> tunnels', async () => {
    const r = await sandbox('sb-v6', [{ host: '::1', port: 1 }]);
    const before = await connectVia(r.egressUrl!, `[::1]:${v6.port}`);
    assert.deepEqual({ status: before.status, code: before.code }, { status: 403, code: 'egress_not_allowed' });
    await approve('ea-v6', 'sb-v6', [{ host: '0:0:0:0:0:0:0:1', port: v6.port }]);
    await active('ea-v6');
    for (const target of [`[::1]:${v6.port}`, `[0::1]:${v6.port}`]) {
      const a = await connectVia(r.egressUrl!, target);
      assert.deepEqual({ status: a.status, echoed: a.echoed }, { status: 200, echoed: 'ping' }, `${target}: ${a.body}`);
    }
    // A zone id is not a host, and an unbracketed IPv6 authority is not host:port.
    assert.equal((await connectVia(r.egressUrl!, `[::1%lo]:${v6.port}`)).status, 400);
    assert.equal((await connectVia(r.egressUrl!, `::1:${v6.port}`)).status, 400);
  });

  it('an IPv6 baseline entry alone admits [::1]:<port>; the apiserver refuses a bracketed or zoned host', async () => {
    const r = await sandbox('sb-v6-base', [{ host: '::1', port: v6.port }]);
    await until('the router has loaded the baseline', async () => (await connectVia(r.egressUrl!, `[::1]:${v6.port}`)).status === 200);
    const a = await connectVia(r.egressUrl!, `[::1]:${v6.port}`);
    assert.deepEqual({ status: a.status, echoed: a.echoed }, { status: 200, echoed: 'ping' });
    for (const [i, host] of ['[::1]', '[::1]:443', 'fe80::1%eth0', '1:2', 'localhost:443', '::1::'].entries()) {
      const res = await ts.client.post(`${API}/karssandboxes`, {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'KarsSandbox',
        metadata: { name: `sb-bad-${i}` },
        spec: { networkPolicy: { allowedEndpoints: [{ host, port: 443 }] } },
      });
      assert.equal(res.status, 422, `${host} is refused by the CRD schema: ${res.text}`);
      assert.match(res.text, /spec\.networkPolicy\.allowedEndpoints\[0\]\.host/);
    }
  });
});
