import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiError } from '@kars/kube-core';
import type { KubeObject } from '@kars/kube-core';
import { Lifecycle } from './lifecycle.js';
import { builtinResources } from './registry/builtins.js';
import { Registry } from './registry/registry.js';
import type { ResourceInfo } from './registry/resource.js';
import { ObjectService } from './service.js';
import type { Target, WriteOptions } from './service.js';
import { CommitError, Store } from './storage/store.js';
import { WatchCache } from './watch/cache.js';
import { until } from '@kars/kube-core/testing';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const OPTS: WriteOptions = { dryRun: false, manager: 'test', fieldValidation: 'Strict' };

/** The object service and its lifecycle controllers over a real store, wired as the server wires them. */
async function stack(failCommit: { on: boolean } = { on: false }): Promise<{
  service: ObjectService;
  lifecycle: Lifecycle;
  registry: Registry;
  errors: unknown[];
  close: () => void;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'kars-lifecycle-'));
  dirs.push(dir);
  const store = new Store(dir, {
    historyWindow: 1000,
    beforeCommit: () => {
      if (failCommit.on) throw new Error('injected commit failure');
    },
  });
  const registry = new Registry(builtinResources());
  const cache = new WatchCache([], store.oldestResumableRv());
  const errors: unknown[] = [];
  const service = new ObjectService(store, registry, cache, (err) => errors.push(err));
  await service.bootstrap();
  const lifecycle = new Lifecycle(service, store, registry, (err) => errors.push(err));
  return {
    service,
    lifecycle,
    registry,
    errors,
    close: () => {
      lifecycle.close();
      store.close();
    },
  };
}

function ri(registry: Registry, group: string, resource: string): ResourceInfo {
  const r = registry.get(group, resource);
  assert.ok(r, `${group}/${resource} is registered`);
  return r;
}

function exists(service: ObjectService, t: Target): boolean {
  try {
    service.get(t);
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.code === 404) return false;
    throw err;
  }
}

const eventually = (check: () => boolean, what: string): Promise<boolean> => until(what, check, { timeoutMs: 10_000, everyMs: 10 });

describe('lifecycle controllers (fed by afterCommit)', () => {
  it('resumes the cleanup of a namespace that was terminating when the process stopped', async () => {
    const s = await stack();
    try {
      const ns = ri(s.registry, '', 'namespaces');
      const cms = ri(s.registry, '', 'configmaps');
      const nsT: Target = { ri: ns, version: 'v1', ns: '', name: 'doomed' };
      const cmT: Target = { ri: cms, version: 'v1', ns: 'doomed', name: 'inside' };
      await s.service.create(nsT, { metadata: { name: 'doomed' } }, OPTS);
      await s.service.create(cmT, { metadata: { name: 'inside' }, data: { a: '1' } }, OPTS);
      // No controllers yet (the process "stopped" right after the namespace was marked).
      const d = await s.service.delete(nsT, { dryRun: false });
      assert.equal(d.gone, false);
      assert.equal((d.object['status'] as { phase: string }).phase, 'Terminating');
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(exists(s.service, cmT), 'without the lifecycle controllers nothing cleans the namespace');
      s.lifecycle.start();
      await eventually(() => !exists(s.service, cmT) && !exists(s.service, nsT), 'namespace content and then the namespace are gone');
      assert.deepEqual(s.errors, []);
    } finally {
      s.close();
    }
  });

  it('sees only committed changes: a delete whose commit fails collects no dependents', async () => {
    const fail = { on: false };
    const s = await stack(fail);
    try {
      s.lifecycle.start();
      const cms = ri(s.registry, '', 'configmaps');
      const owner: Target = { ri: cms, version: 'v1', ns: 'default', name: 'owner' };
      const dep: Target = { ri: cms, version: 'v1', ns: 'default', name: 'dep' };
      const o = await s.service.create(owner, { metadata: { name: 'owner' } }, OPTS);
      const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: o.object.metadata.uid ?? '' };
      await s.service.create(dep, { metadata: { name: 'dep', ownerReferences: [ref] } }, OPTS);

      fail.on = true;
      await assert.rejects(s.service.delete(owner, { dryRun: false }), CommitError);
      fail.on = false;
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(exists(s.service, owner), 'the failed delete left the owner');
      assert.ok(exists(s.service, dep), 'the failed delete triggered no garbage collection');

      await s.service.delete(owner, { dryRun: false });
      await eventually(() => !exists(s.service, dep), 'the dependent is collected after the committed delete');
      assert.deepEqual(s.errors, []);
    } finally {
      s.close();
    }
  });

  it('stops reacting once closed', async () => {
    const s = await stack();
    try {
      s.lifecycle.start();
      s.lifecycle.close();
      const cms = ri(s.registry, '', 'configmaps');
      const owner: Target = { ri: cms, version: 'v1', ns: 'default', name: 'o2' };
      const dep: Target = { ri: cms, version: 'v1', ns: 'default', name: 'd2' };
      const o = await s.service.create(owner, { metadata: { name: 'o2' } }, OPTS);
      const obj: KubeObject = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'd2', ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o2', uid: o.object.metadata.uid ?? '' }] },
      };
      await s.service.create(dep, obj, OPTS);
      await s.service.delete(owner, { dryRun: false });
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(exists(s.service, dep), 'a closed lifecycle collects nothing');
    } finally {
      s.close();
    }
  });
});
