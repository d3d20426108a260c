// Regression tests for Services, found by the differential suite (issue 19): kube's defaulting, what
// its Service storage allocates (service-addresses.ts) and its validation, each asserting
// kube-apiserver v1.34's answer, over real HTTPS against kars apiserver.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

const SVC = '/api/v1/namespaces/default/services';
const service = (name: string, spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name },
  spec,
});
const inRange = (ip: unknown): boolean => typeof ip === 'string' && /^10\.0\.0\.(\d+)$/.test(ip) && Number(ip.split('.')[3]) > 1;

describe('kube-apiserver parity: Services', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => ts.close());

  it('defaults a Service and allocates its cluster IP after managedFields are tracked', async () => {
    const res = await ts.client.post(SVC, service('web', { ports: [{ port: 80 }], selector: { app: 'x' } }));
    assert.equal(res.status, 201, res.text);
    const spec = res.body.spec;
    assert.deepEqual(
      { ...spec, clusterIP: undefined, clusterIPs: undefined },
      {
        clusterIP: undefined,
        clusterIPs: undefined,
        internalTrafficPolicy: 'Cluster',
        ipFamilies: ['IPv4'],
        ipFamilyPolicy: 'SingleStack',
        ports: [{ port: 80, protocol: 'TCP', targetPort: 80 }],
        selector: { app: 'x' },
        sessionAffinity: 'None',
        type: 'ClusterIP',
      },
    );
    assert.ok(inRange(spec.clusterIP), `clusterIP ${spec.clusterIP} is in 10.0.0.0/24 and not the kubernetes Service's`);
    assert.deepEqual(spec.clusterIPs, [spec.clusterIP]);
    assert.deepEqual(res.body.status, { loadBalancer: {} });
    const fields = res.body.metadata.managedFields[0].fieldsV1['f:spec'];
    assert.deepEqual(Object.keys(fields).sort(), ['f:internalTrafficPolicy', 'f:ports', 'f:selector', 'f:sessionAffinity', 'f:type']);
    assert.deepEqual(fields['f:ports'], {
      '.': {},
      'k:{"port":80,"protocol":"TCP"}': { '.': {}, 'f:port': {}, 'f:protocol': {}, 'f:targetPort': {} },
    });
  });

  it('keys an applied port without a protocol by its default, TCP', async () => {
    const res = await ts.client.request(
      'PATCH',
      `${SVC}/applied?fieldManager=me`,
      JSON.stringify(service('applied', { ports: [{ port: 81 }] })),
      { 'content-type': 'application/apply-patch+yaml' },
    );
    assert.equal(res.status, 201, res.text);
    const entry = res.body.metadata.managedFields[0];
    assert.equal(entry.operation, 'Apply');
    assert.deepEqual(entry.fieldsV1['f:spec'], { 'f:ports': { 'k:{"port":81,"protocol":"TCP"}': { '.': {}, 'f:port': {} } } });
    assert.ok(inRange(res.body.spec.clusterIP));
  });

  it('gives concurrent creates distinct addresses', async () => {
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => ts.client.post(SVC, service(`many-${i}`, { ports: [{ port: 80 }] }))),
    );
    for (const a of answers) assert.equal(a.status, 201, a.text);
    const ips = answers.map((a) => a.body.spec.clusterIP as string);
    assert.equal(new Set(ips).size, ips.length, `duplicate addresses: ${ips.join(' ')}`);
    assert.ok(ips.every(inRange));
    for (let i = 0; i < 40; i++) assert.equal((await ts.client.request('DELETE', `${SVC}/many-${i}`)).status, 200);
  });

  it('refuses an address in use, out of range or the reserved first one; a deleted Service frees its address', async () => {
    const first = await ts.client.post(SVC, service('first', { ports: [{ port: 80 }] }));
    const ip = first.body.spec.clusterIP as string;
    const taken = await ts.client.post(SVC, service('second', { ports: [{ port: 80 }], clusterIP: ip }));
    assert.equal(taken.status, 422, taken.text);
    assert.deepEqual(taken.body.details.causes, [
      {
        reason: 'FieldValueInvalid',
        field: 'spec.clusterIPs',
        message: `Invalid value: ["${ip}"]: failed to allocate IP ${ip}: provided IP is already allocated`,
      },
    ]);
    const outside = await ts.client.post(SVC, service('third', { ports: [{ port: 80 }], clusterIP: '10.1.0.5' }));
    assert.equal(outside.status, 422);
    assert.equal(
      outside.body.details.causes[0].message,
      'Invalid value: ["10.1.0.5"]: failed to allocate IP 10.1.0.5: the provided IP (10.1.0.5) is not in the valid range. The range of valid IPs is 10.0.0.0/24',
    );
    const reserved = await ts.client.post(SVC, service('fourth', { ports: [{ port: 80 }], clusterIP: '10.0.0.1' }));
    assert.equal(reserved.status, 422);
    assert.match(reserved.body.message, /provided IP is already allocated/);
    assert.equal((await ts.client.request('DELETE', `${SVC}/first`)).status, 200);
    const reused = await ts.client.post(SVC, service('second', { ports: [{ port: 80 }], clusterIP: ip }));
    assert.equal(reused.status, 201, reused.text);
    assert.deepEqual(reused.body.spec.clusterIPs, [ip]);
  });

  it('keeps allocated values an update leaves out, and refuses changing the cluster IP', async () => {
    const made = await ts.client.post(SVC, service('kept', { ports: [{ port: 80 }], selector: { app: 'a' } }));
    const ip = made.body.spec.clusterIP as string;
    const put = await ts.client.request('PUT', `${SVC}/kept`, service('kept', { ports: [{ port: 80 }], selector: { app: 'b' } }));
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.spec.clusterIP, ip);
    assert.deepEqual(put.body.spec.clusterIPs, [ip]);
    assert.equal(put.body.spec.ipFamilyPolicy, 'SingleStack');
    const other = ip === '10.0.0.250' ? '10.0.0.251' : '10.0.0.250';
    const moved = await ts.client.request(
      'PATCH',
      `${SVC}/kept`,
      { spec: { clusterIP: other, clusterIPs: [other] } },
      {
        'content-type': 'application/merge-patch+json',
      },
    );
    assert.equal(moved.status, 422, moved.text);
    assert.deepEqual(moved.body.details.causes, [
      { reason: 'FieldValueInvalid', field: 'spec.clusterIPs[0]', message: `Invalid value: ["${other}"]: may not change once set` },
    ]);
  });

  it('allocates node ports for a NodePort Service and forbids them on a ClusterIP one', async () => {
    const np = await ts.client.post(SVC, service('np', { type: 'NodePort', ports: [{ port: 80 }] }));
    assert.equal(np.status, 201, np.text);
    const port = np.body.spec.ports[0].nodePort as number;
    assert.ok(port >= 30000 && port <= 32767, `nodePort ${port}`);
    assert.equal(np.body.spec.externalTrafficPolicy, 'Cluster');
    const clash = await ts.client.post(SVC, service('np2', { type: 'NodePort', ports: [{ port: 80, nodePort: port }] }));
    assert.equal(clash.status, 422);
    assert.equal(clash.body.details.causes[0].message, `Invalid value: ${port}: provided port is already allocated`);
    const forbidden = await ts.client.post(SVC, service('cip', { ports: [{ port: 80, nodePort: 30080 }] }));
    assert.equal(forbidden.status, 422);
    assert.deepEqual(forbidden.body.details.causes, [
      { reason: 'FieldValueForbidden', field: 'spec.ports[0].nodePort', message: "Forbidden: may not be used when `type` is 'ClusterIP'" },
    ]);
  });

  it("validates a Service's name as a DNS-1035 label, and its ports", async () => {
    const digit = await ts.client.post(SVC, service('1st', { ports: [{ port: 80 }] }));
    assert.equal(digit.status, 422);
    assert.match(digit.body.details.causes[0].message, /^Invalid value: "1st": a DNS-1035 label must consist of/);
    const none = await ts.client.post(SVC, service('none', {}));
    assert.equal(none.status, 422);
    assert.deepEqual(none.body.details.causes, [{ reason: 'FieldValueRequired', field: 'spec.ports', message: 'Required value' }]);
    const headless = await ts.client.post(SVC, service('headless', { clusterIP: 'None', selector: { app: 'x' } }));
    assert.equal(headless.status, 201, 'a headless Service needs no ports');
    assert.deepEqual(headless.body.spec.clusterIPs, ['None']);
    const two = await ts.client.post(SVC, service('two', { ports: [{ port: 80 }, { port: 81, protocol: 'HTTP' }] }));
    assert.equal(two.status, 422);
    assert.deepEqual(two.body.details.causes, [
      { reason: 'FieldValueRequired', field: 'spec.ports[0].name', message: 'Required value' },
      { reason: 'FieldValueRequired', field: 'spec.ports[1].name', message: 'Required value' },
      {
        reason: 'FieldValueNotSupported',
        field: 'spec.ports[1].protocol',
        message: 'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
      },
    ]);
  });
});
