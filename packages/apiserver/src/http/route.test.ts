import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseRoute } from './route.js';
import { compareVersions } from './discovery.js';
import { evalJsonPath } from './table.js';

describe('parseRoute', () => {
  it('resolves core, group, namespaced, cluster-scoped and subresource paths', () => {
    assert.deepEqual(parseRoute('/api/v1/namespaces/default/configmaps/x'), {
      kind: 'object',
      group: '',
      version: 'v1',
      watchPath: false,
      namespace: 'default',
      resource: 'configmaps',
      name: 'x',
    });
    assert.deepEqual(parseRoute('/apis/kars.azure.com/v1alpha1/namespaces/ns/inferencepolicies/p/status'), {
      kind: 'object',
      group: 'kars.azure.com',
      version: 'v1alpha1',
      watchPath: false,
      namespace: 'ns',
      resource: 'inferencepolicies',
      name: 'p',
      subresource: 'status',
    });
    assert.deepEqual(parseRoute('/api/v1/namespaces/default'), {
      kind: 'object',
      group: '',
      version: 'v1',
      watchPath: false,
      resource: 'namespaces',
      name: 'default',
    });
    assert.deepEqual(parseRoute('/api/v1/namespaces/default/status'), {
      kind: 'object',
      group: '',
      version: 'v1',
      watchPath: false,
      resource: 'namespaces',
      name: 'default',
      subresource: 'status',
    });
    assert.deepEqual(parseRoute('/api/v1/watch/namespaces/a/configmaps'), {
      kind: 'object',
      group: '',
      version: 'v1',
      watchPath: true,
      namespace: 'a',
      resource: 'configmaps',
    });
    assert.deepEqual(parseRoute('/apis/apps/v1'), { kind: 'resourceList', group: 'apps', version: 'v1' });
    assert.equal(parseRoute('/api/v1/namespaces/a/configmaps/b/c/d').kind, 'unknown');
    assert.equal(parseRoute('/nope').kind, 'unknown');
  });
});

describe('discovery version priority', () => {
  it('orders GA before beta before alpha, higher numbers first', () => {
    assert.deepEqual(['v1alpha1', 'v2', 'v1beta2', 'v1', 'v1beta1', 'foo'].sort(compareVersions), [
      'v2',
      'v1',
      'v1beta2',
      'v1beta1',
      'v1alpha1',
      'foo',
    ]);
  });
});

describe('printer-column JSONPath', () => {
  it('reads fields, indexes and equality filters', () => {
    const o = {
      status: {
        conditions: [
          { type: 'Ready', status: 'True' },
          { type: 'Degraded', status: 'False' },
        ],
      },
      spec: { list: ['a', 'b'] },
    };
    assert.equal(evalJsonPath(o, '.status.conditions[?(@.type=="Degraded")].status'), 'False');
    assert.equal(evalJsonPath(o, '.spec.list[1]'), 'b');
    assert.equal(evalJsonPath(o, '.spec.missing.deeper'), undefined);
  });
});
