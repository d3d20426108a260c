/**
 * `kars egress learned SANDBOX --approve HOST` (issue 21 item 7), as a user runs it: a real router
 * refuses egress and records it, `kars egress learned` reads the records from the router kars up
 * recorded, and `--approve` turns a refused host into an EgressApproval through allow-extra's path
 * (the same flags, the same validation, the controller's Active). A host the records never refused
 * is not "learned", and is refused with the command that allows it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningRouter } from '@kars/router';
import { connectStatus } from '@kars/router/stubs';
import { runKars, startTestStack, until } from '../testing/stack.js';
import type { TestStack } from '../testing/stack.js';

const TOKEN = 'cli-learned-token';
const EA = '/apis/kars.azure.com/v1alpha1/namespaces/default/egressapprovals';

describe('kars egress learned --approve', () => {
  let stack: TestStack;
  let router: RunningRouter;
  let root: string;
  let kc: string[];

  before(async () => {
    stack = await startTestStack();
    root = mkdtempSync(join(tmpdir(), 'kars-learned-'));
    kc = ['--kubeconfig', stack.kubeconfig];
    assert.equal((await runKars(['sandbox', 'create', '-f', 'examples/sandbox.yaml', ...kc])).code, 0);
    router = await stack.router('demo-agent', 'default', {
      adminListen: '127.0.0.1:0',
      adminToken: TOKEN,
      decisionLog: { dir: join(root, 'decisions') },
    });
    await until('the router is ready', () => router.isReady());
    for (const target of ['learned.example:443', 'learned.example:443', 'other.example:8443'])
      assert.equal(await connectStatus(router.egressUrl as string, target), 403);
    // What kars up leaves in its data dir.
    writeFileSync(join(root, 'router-admin-url'), `${router.adminUrl as string}\n`);
    writeFileSync(join(root, 'router-admin-token'), `${TOKEN}\n`);
  });
  after(async () => {
    await stack.close();
    rmSync(root, { recursive: true, force: true });
  });

  const learned = (...args: string[]) => runKars(['egress', 'learned', 'demo-agent', '--data-dir', root, ...kc, ...args]);

  it('turns a refused host into an EgressApproval that goes Active', async () => {
    const listed = await until('both refusals are in the records', async () => {
      const r = await learned('-o', 'json');
      const hosts = JSON.parse(r.stdout || '[]') as Array<{ host: string; port: number; count: number }>;
      return hosts.length === 2 ? hosts : undefined;
    });
    assert.deepEqual(
      listed.map((h) => [h.host, h.port, h.count]),
      [
        ['learned.example', 443, 2],
        ['other.example', 8443, 1],
      ],
    );
    const r = await learned('--approve', 'LEARNED.example', '--ttl', 'PT1H', '--reason', 'seen in the records', '--name', 'learned-1');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /egressapproval\.kars\.azure\.com\/learned-1 created/);
    const a = await until('the approval is Active', async () => {
      const o = (await stack.ts.client.get(`${EA}/learned-1`)).body;
      return o.status?.phase === 'Active' ? o : undefined;
    });
    assert.deepEqual(a.spec.hosts, [{ host: 'learned.example', port: 443 }]);
    assert.equal(a.spec.sandbox, 'demo-agent');
    assert.equal(a.spec.reason, 'seen in the records');
  });

  it('refuses a host the records never refused, and bad flags as allow-extra does, writing nothing', async () => {
    const never = await learned('--approve', 'never.example:443', '--ttl', 'PT1H', '--reason', 'r', '--name', 'learned-2');
    assert.equal(never.code, 1);
    assert.match(
      never.stderr,
      /never\.example:443 was not refused for sandbox demo-agent .*refused: learned\.example:443, other\.example:8443.*kars egress allow-extra/,
    );
    const port = await learned('--approve', 'other.example', '--ttl', 'PT1H', '--reason', 'r', '--name', 'learned-3');
    assert.equal(port.code, 1, 'port 443 was never refused for other.example');
    const noTtl = await learned('--approve', 'other.example:8443', '--reason', 'r', '--name', 'learned-4');
    assert.equal(noTtl.code, 1);
    assert.match(noTtl.stderr, /missing --ttl/);
    const badTtl = await learned('--approve', 'other.example:8443', '--ttl', 'P30D', '--reason', 'r', '--name', 'learned-5');
    assert.equal(badTtl.code, 1, badTtl.stdout);
    for (const n of ['learned-2', 'learned-3', 'learned-4', 'learned-5'])
      assert.equal((await stack.ts.client.get(`${EA}/${n}`).catch((e: { code?: number }) => ({ status: e.code }))).status, 404, n);
  });
});
