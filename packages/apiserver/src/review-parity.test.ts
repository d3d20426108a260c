// Regression tests for problems found reviewing the kube-apiserver parity rounds (624de3d..c187ff4):
// each test failed before its fix.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';
import { scanGoJson } from './http/go-json.js';

describe('review: Go JSON scanner', () => {
  it('finds repeated keys under a long path in linear time', () => {
    const long = 'A'.repeat(1_000_000);
    const bodies = [
      // one duplicate, repeated many times, under a key of a megabyte
      `{"${long}":{${'"a":1,'.repeat(100_000)}"a":1}}`,
      // the same path met in many objects
      `{"${long}":{${'"x":{"a":1,"a":1},'.repeat(50_000)}"x":1}}`,
    ];
    for (const body of bodies) {
      const started = Date.now();
      const scan = scanGoJson(Buffer.from(body));
      assert.equal(scan.error, undefined);
      assert.ok(scan.duplicates.length >= 1);
      assert.ok(Date.now() - started < 2000, `scanned ${body.length} bytes in ${Date.now() - started} ms`);
    }
  });

  it('keeps the strict decoder paths', () => {
    assert.deepEqual(scanGoJson(Buffer.from('{"":{"a":1,"a":2}}')).duplicates, ['.a']);
    assert.deepEqual(scanGoJson(Buffer.from('{"a":{"b.c":1,"b.c":1},"a.b":{"c":1,"c":1}}')).duplicates, ['a.b.c']);
    assert.deepEqual(scanGoJson(Buffer.from('[[{"k":1,"k":1}],{"k":{"z":1,"z":1},"k":0}]')).duplicates, ['[0][0].k', '[1].k.z', '[1].k']);
  });
});

describe('review: Service addresses', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());
  const S = '/api/v1/namespaces/default/services';
  const svc = (name: string, spec: Record<string, unknown>): unknown => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name },
    spec: { ports: [{ port: 80 }], ...spec },
  });

  it("refuses cluster IPs that would claim another Service's address unchecked, as kube validates them", async () => {
    const owner = await ts.client.post(S, svc('owner', {}));
    assert.equal(owner.status, 201, owner.text);
    const taken = owner.body.spec.clusterIP as string;
    const free = taken === '10.0.0.200' ? '10.0.0.201' : '10.0.0.200';
    const headless = await ts.client.post(S, svc('headless', { clusterIP: 'None', clusterIPs: [taken] }));
    assert.equal(headless.status, 422, headless.text);
    assert.equal(
      headless.body.message,
      `Service "headless" is invalid: spec.clusterIPs: Invalid value: ["${taken}"]: first value must match \`clusterIP\``,
    );
    const second = await ts.client.post(S, svc('second', { clusterIP: free, clusterIPs: [free, taken] }));
    assert.equal(second.status, 422, second.text);
    assert.equal(
      second.body.message,
      `Service "second" is invalid: spec.clusterIPs: Invalid value: ["${free}","${taken}"]: may specify no more than one IP for each IP family`,
    );
    const none = await ts.client.post(S, svc('none2', { clusterIPs: ['None', taken] }));
    assert.equal(none.status, 422, none.text);
    assert.match(none.body.message, /'None' must be the first and only value/);
    const external = await ts.client.post(S, svc('external', { type: 'ExternalName', externalName: 'a.example.com', clusterIP: taken }));
    assert.equal(external.status, 422, external.text);
    assert.equal(
      external.body.message,
      'Service "external" is invalid: spec.clusterIPs: Forbidden: may not be set for ExternalName services',
    );
  });

  it('releases the cluster IP and node ports of a Service changed to ExternalName, as kube drops type-dependent fields', async () => {
    const np = await ts.client.post(S, svc('to-external', { type: 'NodePort' }));
    assert.equal(np.status, 201, np.text);
    const ip = np.body.spec.clusterIP as string;
    const nodePort = np.body.spec.ports[0].nodePort as number;
    const changed = await ts.client.patch(S + '/to-external', { spec: { type: 'ExternalName', externalName: 'a.example.com' } }, 'merge');
    assert.equal(changed.status, 200, changed.text);
    for (const field of ['clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy'])
      assert.equal(changed.body.spec[field], undefined, field);
    assert.equal(changed.body.spec.ports[0].nodePort, undefined);
    const reuse = await ts.client.post(S, svc('reuse', { type: 'NodePort', clusterIP: ip, ports: [{ port: 80, nodePort }] }));
    assert.equal(reuse.status, 201, reuse.text);
  });
});

describe('review: Namespace finalize', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  it('removes a spec finalizer through PUT /finalize, so a deleted namespace with one can go', async () => {
    const NS = '/api/v1/namespaces';
    const made = await ts.client.post(NS, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'held' },
      spec: { finalizers: ['example.com/hold'] },
    });
    assert.equal(made.status, 201, made.text);
    assert.equal((await ts.client.delete(`${NS}/held`)).status, 200);
    const held = await eventually(async () => {
      const r = await ts.client.get(`${NS}/held`);
      return r.body?.spec?.finalizers?.length === 1 ? r : undefined;
    });
    assert.deepEqual(held.body.spec.finalizers, ['example.com/hold']);
    const fin = await ts.client.put(`${NS}/held/finalize`, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'held' },
      spec: { finalizers: [] },
    });
    assert.equal(fin.status, 200, fin.text);
    await eventually(async () => ((await ts.client.get(`${NS}/held`)).status === 404 ? true : undefined));
  });
});
