// Built-in kinds through the real server: unknown fields (Strict fails the write, Warn drops the field with a warning,
// Ignore drops it silently; maps and int-or-string accept anything) and kube's Secret type default.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';

void describe('built-in kinds: unknown fields and defaults', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => {
    await ts?.close();
  });

  const svc = (name: string): Record<string, unknown> => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: { 'any-key': 'x' }, bogusMeta: 1 },
    spec: { ports: [{ port: 80, targetPort: 'http', bogus: true }], selector: { 'app.kubernetes.io/name': 'x' } },
    extra: { a: 1 },
  });

  void it('fails a Strict create naming every unknown field, and stores nothing', async () => {
    const r = await ts.client.post('/api/v1/namespaces/default/services?fieldValidation=Strict', svc('strict'));
    assert.equal(r.status, 400, r.text);
    assert.equal(
      r.body.message,
      'strict decoding error: unknown field "metadata.bogusMeta", unknown field "spec.ports[0].bogus", unknown field "extra"',
    );
    assert.equal((await ts.client.get('/api/v1/namespaces/default/services/strict')).status, 404);
  });

  void it('drops unknown fields with a warning each under Warn (the default), keeping map keys and int-or-string', async () => {
    const r = await ts.client.post('/api/v1/namespaces/default/services', svc('warn'));
    assert.equal(r.status, 201, r.text);
    assert.match(String(r.headers['warning']), /unknown field \\"spec\.ports\[0\]\.bogus\\"/);
    assert.match(String(r.headers['warning']), /unknown field \\"extra\\"/);
    const got = (await ts.client.get('/api/v1/namespaces/default/services/warn')).body;
    assert.equal(got.extra, undefined);
    assert.equal(got.metadata.bogusMeta, undefined);
    // (and defaulted as kube defaults a Service: the port's protocol is TCP)
    assert.deepEqual(got.spec.ports, [{ port: 80, protocol: 'TCP', targetPort: 'http' }]);
    assert.deepEqual(got.spec.selector, { 'app.kubernetes.io/name': 'x' });
    assert.deepEqual(got.metadata.labels, { 'any-key': 'x' });
  });

  void it('drops them silently under Ignore, and checks a Deployment down to its containers', async () => {
    const dep = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
      spec: {
        selector: { matchLabels: { a: 'b' } },
        template: {
          metadata: { labels: { a: 'b' } },
          spec: {
            containers: [{ name: 'c', image: 'i', resources: { limits: { cpu: '1', 'example.com/gpu': 2 } }, imagePullPolicyy: 'Always' }],
          },
        },
      },
    };
    const strict = await ts.client.post('/apis/apps/v1/namespaces/default/deployments?fieldValidation=Strict', dep);
    assert.equal(strict.status, 400);
    assert.equal(strict.body.message, 'strict decoding error: unknown field "spec.template.spec.containers[0].imagePullPolicyy"');
    const r = await ts.client.post('/apis/apps/v1/namespaces/default/deployments?fieldValidation=Ignore', dep);
    assert.equal(r.status, 201, r.text);
    assert.equal(r.headers['warning'], undefined);
    // The misspelt field is dropped; kube's container defaults are applied (image "i" has no tag: Always).
    assert.deepEqual(r.body.spec.template.spec.containers, [
      {
        name: 'c',
        image: 'i',
        resources: { limits: { cpu: '1', 'example.com/gpu': 2 } },
        imagePullPolicy: 'Always',
        terminationMessagePath: '/dev/termination-log',
        terminationMessagePolicy: 'File',
      },
    ]);
  });

  void it('defaults a Secret without a type to Opaque, as kube-apiserver does', async () => {
    const r = await ts.client.post('/api/v1/namespaces/default/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's' },
      data: { a: 'Yg==' },
    });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.body.type, 'Opaque');
    const typed = await ts.client.post('/api/v1/namespaces/default/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 't' },
      type: 'kubernetes.io/tls',
      data: {},
    });
    assert.equal(typed.body.type, 'kubernetes.io/tls');
  });
});
