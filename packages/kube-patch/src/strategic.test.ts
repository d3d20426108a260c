import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyStrategicMergePatch } from './strategic.js';
import { builtinStrategicInfo } from './builtin.js';
import { PatchError } from './errors.js';

const deployInfo = builtinStrategicInfo['apps/v1/Deployment']!;

const deploy = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', labels: { app: 'web', tier: 'fe' }, finalizers: ['a'] },
  spec: {
    replicas: 1,
    template: {
      spec: {
        containers: [
          { name: 'app', image: 'app:1', env: [{ name: 'A', value: '1' }], ports: [{ containerPort: 80 }] },
          { name: 'sidecar', image: 'side:1' },
        ],
        tolerations: [{ key: 'x' }],
      },
    },
  },
};

void test('containers merge by name and env merges by name inside a container', () => {
  const out = applyStrategicMergePatch(
    deploy,
    {
      spec: {
        template: {
          spec: {
            containers: [
              { name: 'app', image: 'app:2', env: [{ name: 'B', value: '2' }] },
              { name: 'new', image: 'n:1' },
            ],
          },
        },
      },
    },
    deployInfo,
  ) as typeof deploy;
  const cs = out.spec.template.spec.containers;
  assert.deepEqual(
    cs.map((c) => c.name),
    ['app', 'sidecar', 'new'],
  );
  assert.equal(cs[0]!.image, 'app:2');
  assert.deepEqual(cs[0]!.env, [
    { name: 'A', value: '1' },
    { name: 'B', value: '2' },
  ]);
  assert.deepEqual(cs[0]!.ports, [{ containerPort: 80 }]);
  assert.equal(cs[1]!.image, 'side:1');
});

void test('$patch: delete removes the list item with that key', () => {
  const out = applyStrategicMergePatch(
    deploy,
    { spec: { template: { spec: { containers: [{ name: 'sidecar', $patch: 'delete' }] } } } },
    deployInfo,
  ) as typeof deploy;
  assert.deepEqual(
    out.spec.template.spec.containers.map((c) => c.name),
    ['app'],
  );
});

void test('null deletes a field, in maps and inside a keyed list item', () => {
  const out = applyStrategicMergePatch(
    deploy,
    { metadata: { labels: { tier: null } }, spec: { template: { spec: { containers: [{ name: 'app', env: null }] } } } },
    deployInfo,
  ) as typeof deploy;
  assert.deepEqual(out.metadata.labels, { app: 'web' });
  assert.equal('env' in out.spec.template.spec.containers[0]!, false);
});

void test('a list without a merge key is replaced', () => {
  const out = applyStrategicMergePatch(
    deploy,
    { spec: { template: { spec: { tolerations: [{ key: 'y' }] } } } },
    deployInfo,
  ) as typeof deploy;
  assert.deepEqual(out.spec.template.spec.tolerations, [{ key: 'y' }]);
  const role = { rules: [{ verbs: ['get'] }] };
  assert.deepEqual(
    applyStrategicMergePatch(role, { rules: [{ verbs: ['list'] }] }, builtinStrategicInfo['rbac.authorization.k8s.io/v1/Role']!),
    { rules: [{ verbs: ['list'] }] },
  );
});

void test('$patch: replace replaces a map or a whole keyed list', () => {
  const out = applyStrategicMergePatch(
    deploy,
    {
      metadata: { labels: { $patch: 'replace', only: 'me' } },
      spec: { template: { spec: { containers: [{ name: 'x', image: 'x:1' }, { $patch: 'replace' }] } } },
    },
    deployInfo,
  ) as typeof deploy;
  assert.deepEqual(out.metadata.labels, { only: 'me' });
  assert.deepEqual(out.spec.template.spec.containers, [{ name: 'x', image: 'x:1' }]);
});

void test('finalizers merge as a set and $deleteFromPrimitiveList removes values', () => {
  const out = applyStrategicMergePatch(deploy, { metadata: { finalizers: ['a', 'b'] } }, deployInfo) as typeof deploy;
  assert.deepEqual(out.metadata.finalizers, ['a', 'b']);
  const out2 = applyStrategicMergePatch(out, { metadata: { '$deleteFromPrimitiveList/finalizers': ['a'] } }, deployInfo) as typeof deploy;
  assert.deepEqual(out2.metadata.finalizers, ['b']);
});

void test('$retainKeys drops keys not listed and $setElementOrder is accepted', () => {
  const out = applyStrategicMergePatch(
    { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1 } } },
    { strategy: { $retainKeys: ['type'], type: 'Recreate' }, '$setElementOrder/x': [] },
    { mergeKeys: {} },
  );
  assert.deepEqual(out, { strategy: { type: 'Recreate' } });
});

void test('a keyed list item without its merge key and an unknown $patch are rejected', () => {
  assert.throws(
    () => applyStrategicMergePatch(deploy, { spec: { template: { spec: { containers: [{ image: 'x' }] } } } }, deployInfo),
    PatchError,
  );
  assert.throws(() => applyStrategicMergePatch(deploy, { metadata: { $patch: 'explode' } }, deployInfo), PatchError);
  assert.throws(() => applyStrategicMergePatch(deploy, [], deployInfo), PatchError);
});

void test('service ports merge by port', () => {
  const svc = {
    spec: {
      ports: [
        { port: 80, name: 'http' },
        { port: 443, name: 'https' },
      ],
    },
  };
  const out = applyStrategicMergePatch(svc, { spec: { ports: [{ port: 443, targetPort: 8443 }] } }, builtinStrategicInfo['/v1/Service']!);
  assert.deepEqual(out, {
    spec: {
      ports: [
        { port: 80, name: 'http' },
        { port: 443, name: 'https', targetPort: 8443 },
      ],
    },
  });
});

void test('strategic merge patch never mutates its inputs', () => {
  const input = structuredClone(deploy);
  const patch = { spec: { template: { spec: { containers: [{ name: 'app', image: 'z' }] } } } };
  const p0 = structuredClone(patch);
  const out = applyStrategicMergePatch(input, patch, deployInfo) as typeof deploy;
  out.spec.template.spec.containers[1]!.image = 'mutated';
  assert.deepEqual(input, deploy);
  assert.deepEqual(patch, p0);
});
