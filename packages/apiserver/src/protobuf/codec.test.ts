// Kubernetes protobuf bodies: golden bytes captured from real kubectl 1.32 and 1.33
// (scripts/capture-protobuf-fixtures.mjs), decoded and compared with the JSON kubectl 1.31 sends
// for the same command; malformed input; and the HTTP path through a real server.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { ApiError } from '@kars/kube-core';
import { decodeProtobuf } from './codec.js';
import { PROTO_FILES } from '../kinds/generated.js';
import { startTestServer, widgetCrd } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';

const TESTDATA = join(dirname(fileURLToPath(import.meta.url)), '../../src/protobuf/testdata');
const names = readdirSync(TESTDATA)
  .filter((f) => f.endsWith('.json'))
  .map((f) => f.slice(0, -'.json'.length));

/** Go's JSON null means "absent" (creationTimestamp: null); the decoded form leaves such fields out. */
function withoutNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutNulls);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== null)
        .map(([k, x]) => [k, withoutNulls(x)]),
    );
  return v;
}

function fixture(name: string, version: string): Buffer {
  return readFileSync(join(TESTDATA, `${name}.${version}.pb`));
}

function expectJson(name: string): unknown {
  return withoutNulls(JSON.parse(readFileSync(join(TESTDATA, `${name}.json`), 'utf8')));
}

/** Encode a message with our own definitions, wrapped in the envelope (for kinds kubectl cannot create). */
function envelope(apiVersion: string, kind: string, message: string, value: Record<string, unknown>): Buffer {
  const root = new protobuf.Root();
  for (const f of PROTO_FILES) protobuf.parse(f.text, root, { keepCase: true });
  const t = root.lookupType(message);
  const raw = t.encode(t.fromObject(value)).finish();
  const u = root.lookupType('k8s.io.apimachinery.pkg.runtime.Unknown');
  return Buffer.concat([Buffer.from('k8s\0', 'latin1'), u.encode(u.fromObject({ typeMeta: { apiVersion, kind }, raw })).finish()]);
}

void describe('protobuf request bodies', () => {
  void it('has fixtures for every kind kubectl create makes', () => {
    assert.deepEqual(names.sort(), [
      'clusterrole',
      'clusterrole-aggregated',
      'clusterrolebinding',
      'configmap',
      'deployment',
      'namespace',
      'role',
      'rolebinding',
      'secret-docker-registry',
      'secret-generic',
      'service-clusterip',
      'service-nodeport',
      'serviceaccount',
    ]);
  });

  for (const name of names) {
    for (const version of ['1.32', '1.33']) {
      void it(`decodes kubectl ${version}'s ${name} body to the JSON kubectl 1.31 sends`, () => {
        assert.deepEqual(decodeProtobuf(fixture(name, version)), expectJson(name));
      });
    }
  }

  void it('keeps binaryData bytes as base64 and an empty data value as ""', () => {
    const cm = decodeProtobuf(fixture('configmap', '1.33')) as any;
    assert.deepEqual(cm.data, { a: 'b', empty: '' });
    assert.deepEqual(Buffer.from(cm.binaryData.bin, 'base64'), Buffer.from([0, 1, 2, 0xfe, 0xff]));
  });

  void it('keeps a pointer field that is explicitly zero (replicas: 0) and drops zero non-pointer fields', () => {
    const d = decodeProtobuf(fixture('deployment', '1.33')) as any;
    assert.equal(d.spec.replicas, 0);
    assert.equal('generateName' in d.metadata, false);
    assert.equal('creationTimestamp' in d.metadata, false);
    assert.deepEqual(d.spec.strategy, {});
  });

  void it('writes Time as RFC 3339 seconds, MicroTime with microseconds, and int-or-string both ways', () => {
    const ev = decodeProtobuf(
      envelope('v1', 'Event', 'k8s.io.api.core.v1.Event', {
        metadata: { name: 'e1', namespace: 'default' },
        involvedObject: { kind: 'Pod', name: 'p' },
        reason: 'Started',
        firstTimestamp: { seconds: 1796047200, nanos: 999_999_999 },
        eventTime: { seconds: 1796047200, nanos: 123_456_789 },
        count: 0,
        series: { count: 2, lastObservedTime: { seconds: 0 } },
      }),
    ) as any;
    assert.equal(ev.firstTimestamp, '2026-11-30T14:00:00Z');
    assert.equal(ev.eventTime, '2026-11-30T14:00:00.123456Z');
    assert.equal('count' in ev, false);
    assert.deepEqual(ev.series, { count: 2, lastObservedTime: '1970-01-01T00:00:00.000000Z' });
    const svc = decodeProtobuf(fixture('service-clusterip', '1.33')) as any;
    assert.deepEqual(
      svc.spec.ports.map((p: any) => p.targetPort),
      [8080, 'https'],
    );
  });

  void it('decodes a Lease with MicroTimes and pointer ints', () => {
    const l = decodeProtobuf(
      envelope('coordination.k8s.io/v1', 'Lease', 'k8s.io.api.coordination.v1.Lease', {
        metadata: { name: 'l' },
        spec: { holderIdentity: '', leaseDurationSeconds: 0, renewTime: { seconds: 1, nanos: 1000 } },
      }),
    ) as any;
    assert.deepEqual(l.spec, { holderIdentity: '', leaseDurationSeconds: 0, renewTime: '1970-01-01T00:00:01.000001Z' });
  });

  void it('refuses a kind it has no definition for with 415', () => {
    const u = envelope('example.com/v1', 'Widget', 'k8s.io.api.core.v1.ConfigMap', {});
    assert.throws(
      () => decodeProtobuf(u),
      (e: unknown) => e instanceof ApiError && e.code === 415,
    );
  });

  void it('answers 400, never another exception, for every truncation of every fixture', () => {
    for (const name of names) {
      const full = fixture(name, '1.33');
      for (let n = 0; n < full.length; n++) {
        try {
          decodeProtobuf(full.subarray(0, n));
        } catch (e) {
          assert.ok(e instanceof ApiError && e.code === 400, `${name} cut at ${n}: ${String(e)}`);
        }
      }
    }
  });

  void it('answers 400 or 415, never another exception, for random bytes after the magic (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (bytes, magic) => {
        const body = magic ? Buffer.concat([Buffer.from('k8s\0', 'latin1'), bytes]) : Buffer.from(bytes);
        try {
          decodeProtobuf(body);
        } catch (e) {
          return e instanceof ApiError && (e.code === 400 || e.code === 415);
        }
        return true;
      }),
      { numRuns: 2000 },
    );
  });

  void it('answers 400 for a mutated ConfigMap body, never another exception (property)', () => {
    const base = fixture('configmap', '1.33');
    fc.assert(
      fc.property(fc.nat({ max: base.length - 1 }), fc.integer({ min: 0, max: 255 }), (at, byte) => {
        const b = Buffer.from(base);
        b[at] = byte;
        try {
          decodeProtobuf(b);
        } catch (e) {
          return e instanceof ApiError && (e.code === 400 || e.code === 415);
        }
        return true;
      }),
      { numRuns: 3000 },
    );
  });
});

void describe('protobuf bodies over HTTP', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => {
    await ts?.close();
  });

  const PB = { 'content-type': 'application/vnd.kubernetes.protobuf', accept: 'application/vnd.kubernetes.protobuf,application/json' };

  void it('creates a ConfigMap from kubectl 1.33 bytes and stores the decoded object, answering JSON', async () => {
    const r = await ts.client.request('POST', '/api/v1/namespaces/default/configmaps', fixture('configmap', '1.33'), PB);
    assert.equal(r.status, 201, r.text);
    assert.match(String(r.headers['content-type']), /application\/json/);
    const got = await ts.client.get('/api/v1/namespaces/default/configmaps/cm');
    assert.deepEqual(got.body.data, { a: 'b', empty: '' });
    assert.equal(got.body.binaryData.bin, Buffer.from([0, 1, 2, 0xfe, 0xff]).toString('base64'));
  });

  void it('creates a Deployment from kubectl 1.32 bytes', async () => {
    const r = await ts.client.request('POST', '/apis/apps/v1/namespaces/default/deployments', fixture('deployment', '1.32'), PB);
    assert.equal(r.status, 201, r.text);
    assert.equal(r.body.spec.replicas, 0);
    assert.deepEqual(r.body.spec.template.spec.containers[0].command, ['sleep', '3600']);
  });

  void it('answers 400 with a Status for a truncated body, and the server keeps serving', async () => {
    const b = fixture('namespace', '1.33');
    const r = await ts.client.request('POST', '/api/v1/namespaces', b.subarray(0, b.length - 3), PB);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.kind, 'Status');
    assert.equal(r.body.reason, 'BadRequest');
    assert.equal((await ts.client.get('/api/v1/namespaces/default')).status, 200);
  });

  void it("refuses a protobuf body for a custom resource with kube-apiserver's 415", async () => {
    assert.equal((await ts.client.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', widgetCrd())).status, 201);
    await new Promise((r) => setTimeout(r, 200));
    const r = await ts.client.request('POST', '/apis/example.com/v1/namespaces/default/widgets', fixture('configmap', '1.33'), PB);
    assert.equal(r.status, 415, r.text);
    assert.equal(r.body.reason, 'UnsupportedMediaType');
    assert.equal(
      r.body.message,
      'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml',
    );
  });

  void it('answers 406 when the client accepts protobuf responses only', async () => {
    const r = await ts.client.request('GET', '/api/v1/namespaces/default/configmaps', undefined, {
      accept: 'application/vnd.kubernetes.protobuf',
    });
    assert.equal(r.status, 406, r.text);
    assert.equal(r.body.reason, 'NotAcceptable');
    assert.match(r.body.message, /only the following media types are accepted: application\/json/);
    const ok = await ts.client.request('GET', '/api/v1/namespaces/default/configmaps', undefined, {
      accept: 'application/vnd.kubernetes.protobuf, */*',
    });
    assert.equal(ok.status, 200);
  });
});
