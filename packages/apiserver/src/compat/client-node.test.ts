// Compatibility: the real @kubernetes/client-node 1.x, over HTTPS, against an in-process server.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  Watch,
  loadYaml,
  makeInformer,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { KubernetesObject, V1ConfigMap, V1CustomResourceDefinition } from '@kubernetes/client-node';
import { eventually, startTestServer, widgetCrd } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';

const NS = 'default';
const GROUP = 'example.com';
const VERSION = 'v1';
const PLURAL = 'widgets';
/** A watch that never gets going must fail its test, not hang the run. */
const WATCH_TEST_TIMEOUT_MS = 10_000;

/** Run `fn`, expecting an ApiException; return it. */
async function apiError(fn: () => Promise<unknown>): Promise<ApiException<unknown>> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof ApiException, `expected an ApiException, got ${String(err)}`);
    return err as ApiException<unknown>;
  }
  assert.fail('expected the call to fail');
}

/** The metav1.Status in an ApiException body (client-node hands it over as text). */
function statusOf(e: ApiException<unknown>): any {
  return typeof e.body === 'string' ? JSON.parse(e.body) : e.body;
}

function configMap(name: string, data: Record<string, string>, labels?: Record<string, string>): V1ConfigMap {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, ...(labels ? { labels } : {}) }, data };
}

/** A watch event as client-node's Watch reports it. */
interface Seen {
  type: string;
  obj: any;
}

/** Start a client-node Watch that records its events; `stop()` aborts it. */
async function recordWatch(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean>,
): Promise<{ seen: Seen[]; stop: () => void; done: Promise<unknown> }> {
  const seen: Seen[] = [];
  let finish!: (err: unknown) => void;
  const done = new Promise<unknown>((resolve) => (finish = resolve));
  const controller = await new Watch(kc).watch(
    path,
    query,
    (type, obj) => seen.push({ type, obj }),
    (err) => finish(err),
  );
  return { seen, stop: () => controller.abort(), done };
}

void describe('@kubernetes/client-node 1.x against kars apiserver', () => {
  let ts: TestServer;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ext: ApiextensionsV1Api;
  let custom: CustomObjectsApi;

  before(async () => {
    ts = await startTestServer({ bookmarkIntervalSeconds: 1 });
    kc = new KubeConfig();
    kc.loadFromFile(ts.server.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    ext = kc.makeApiClient(ApiextensionsV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
  });

  after(async () => {
    await ts.close();
  });

  void describe('CoreV1Api on ConfigMaps', () => {
    void it('creates a ConfigMap and reads it back with server-set metadata', async () => {
      const created = await core.createNamespacedConfigMap({ namespace: NS, body: configMap('cn-crud', { a: '1' }, { app: 'cn' }) });
      assert.equal(created.metadata?.name, 'cn-crud');
      assert.equal(created.metadata?.namespace, NS);
      assert.match(created.metadata?.uid ?? '', /^[0-9a-f-]{36}$/);
      assert.match(created.metadata?.resourceVersion ?? '', /^\d+$/);
      assert.ok(created.metadata?.creationTimestamp instanceof Date, 'creationTimestamp deserializes to a Date');

      const read = await core.readNamespacedConfigMap({ name: 'cn-crud', namespace: NS });
      assert.deepEqual(read.data, { a: '1' });
      assert.equal(read.metadata?.uid, created.metadata?.uid);
      assert.equal(read.metadata?.resourceVersion, created.metadata?.resourceVersion);
    });

    void it('replaces a ConfigMap and bumps its resourceVersion', async () => {
      const cur = await core.readNamespacedConfigMap({ name: 'cn-crud', namespace: NS });
      const replaced = await core.replaceNamespacedConfigMap({
        name: 'cn-crud',
        namespace: NS,
        body: { ...cur, data: { a: '2', b: 'x' } },
      });
      assert.deepEqual(replaced.data, { a: '2', b: 'x' });
      assert.ok(Number(replaced.metadata?.resourceVersion) > Number(cur.metadata?.resourceVersion));
      assert.deepEqual((await core.readNamespacedConfigMap({ name: 'cn-crud', namespace: NS })).data, { a: '2', b: 'x' });
    });

    void it('merge-patches a ConfigMap when the Content-Type is set through setHeaderOptions', async () => {
      const patched = await core.patchNamespacedConfigMap(
        { name: 'cn-crud', namespace: NS, body: { data: { b: null, c: 'new' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      assert.deepEqual(patched.data, { a: '2', c: 'new' });
    });

    void it('JSON-patches a ConfigMap with the default patch Content-Type', async () => {
      const patched = await core.patchNamespacedConfigMap({
        name: 'cn-crud',
        namespace: NS,
        body: [{ op: 'replace', path: '/data/a', value: '3' }],
      });
      assert.deepEqual(patched.data, { a: '3', c: 'new' });
    });

    void it('lists ConfigMaps filtered by a labelSelector', async () => {
      await core.createNamespacedConfigMap({ namespace: NS, body: configMap('cn-other', { z: '1' }, { app: 'other' }) });
      const list = await core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'app=cn' });
      assert.deepEqual(
        list.items.map((c) => c.metadata?.name),
        ['cn-crud'],
      );
      assert.match(list.metadata?.resourceVersion ?? '', /^\d+$/);
      const none = await core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'app=nothing' });
      assert.equal(none.items.length, 0);
      const all = await core.listNamespacedConfigMap({ namespace: NS, labelSelector: 'app in (cn,other)' });
      assert.deepEqual(all.items.map((c) => c.metadata?.name).sort(), ['cn-crud', 'cn-other']);
    });

    void it('reports a create of an existing name as an ApiException with code 409 AlreadyExists', async () => {
      const e = await apiError(() => core.createNamespacedConfigMap({ namespace: NS, body: configMap('cn-crud', {}) }));
      assert.equal(e.code, 409);
      const status = statusOf(e);
      assert.equal(status.kind, 'Status');
      assert.equal(status.reason, 'AlreadyExists');
      assert.equal(status.details?.name, 'cn-crud');
    });

    void it('rejects a replace carrying a stale resourceVersion with 409 Conflict', async () => {
      const cur = await core.readNamespacedConfigMap({ name: 'cn-crud', namespace: NS });
      await core.replaceNamespacedConfigMap({ name: 'cn-crud', namespace: NS, body: { ...cur, data: { fresh: 'yes' } } });
      const e = await apiError(() =>
        core.replaceNamespacedConfigMap({ name: 'cn-crud', namespace: NS, body: { ...cur, data: { stale: 'yes' } } }),
      );
      assert.equal(e.code, 409);
      assert.equal(statusOf(e).reason, 'Conflict');
      assert.deepEqual((await core.readNamespacedConfigMap({ name: 'cn-crud', namespace: NS })).data, { fresh: 'yes' });
    });

    void it('deletes a ConfigMap, after which reading it is a 404', async () => {
      await core.deleteNamespacedConfigMap({ name: 'cn-crud', namespace: NS });
      await core.deleteNamespacedConfigMap({ name: 'cn-other', namespace: NS });
      const e = await apiError(() => core.readNamespacedConfigMap({ name: 'cn-crud', namespace: NS }));
      assert.equal(e.code, 404);
      assert.equal(statusOf(e).reason, 'NotFound');
    });

    void it('lets exactly one of 20 concurrent replaces with the same resourceVersion win, and keeps its data', async () => {
      const base = await core.createNamespacedConfigMap({ namespace: NS, body: configMap('cn-race', { writer: 'none' }) });
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          core.replaceNamespacedConfigMap({ name: 'cn-race', namespace: NS, body: { ...base, data: { writer: `w${i}` } } }),
        ),
      );
      const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      const lost = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
      assert.equal(won.length, 1, `exactly one replace succeeds; got ${won.length}`);
      assert.equal(lost.length, 19);
      for (const err of lost) {
        assert.ok(err instanceof ApiException, `a losing replace fails with an ApiException, got ${String(err)}`);
        assert.equal(err.code, 409);
      }
      const final = await core.readNamespacedConfigMap({ name: 'cn-race', namespace: NS });
      assert.deepEqual(final.data, won[0]!.data);
      assert.match(final.data?.['writer'] ?? '', /^w\d+$/);
      assert.equal(final.metadata?.resourceVersion, won[0]!.metadata?.resourceVersion);
      await core.deleteNamespacedConfigMap({ name: 'cn-race', namespace: NS });
    });
  });

  void describe('CRDs and custom objects', () => {
    before(async () => {
      // client-node 1.x serializes request bodies through its typed models, whose property names differ
      // from the wire names for some schema keywords (`_default`, `_enum`, `x_kubernetes_validations`):
      // a plain JSON object loses them. loadYaml deserializes the wire form into the typed model.
      const body = loadYaml<V1CustomResourceDefinition>(JSON.stringify(widgetCrd()));
      const crd = await ext.createCustomResourceDefinition({ body });
      assert.equal(crd.metadata?.name, 'widgets.example.com');
      // The new resource is served once the CRD is Established.
      await eventually(async () => {
        const c = await ext.readCustomResourceDefinition({ name: 'widgets.example.com' });
        return c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True');
      });
    });

    void it('creates the widget CRD through ApiextensionsV1Api and reports it Established', async () => {
      const crd = await ext.readCustomResourceDefinition({ name: 'widgets.example.com' });
      assert.equal(crd.spec.names.kind, 'Widget');
      assert.deepEqual(crd.spec.names.shortNames, ['wd']);
      assert.equal(crd.status?.acceptedNames?.plural, 'widgets');
      const established = crd.status?.conditions?.find((c) => c.type === 'Established');
      assert.equal(established?.status, 'True');
      // The schema keywords whose model names differ from their wire names made the round trip.
      const spec = crd.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.['spec'];
      assert.equal(spec?.properties?.['max']?._default, 10);
      assert.deepEqual(spec?.properties?.['color']?._enum, ['red', 'blue']);
      assert.deepEqual(
        spec?.x_kubernetes_validations?.map((v) => v.rule),
        ['self.size <= self.max'],
      );
    });

    void it('creates a Widget with its default applied, and gets it back', async () => {
      const created: any = await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        body: {
          apiVersion: 'example.com/v1',
          kind: 'Widget',
          metadata: { name: 'w1', labels: { tier: 'a' } },
          spec: { size: 3, color: 'red' },
        },
      });
      assert.equal(created.metadata.name, 'w1');
      assert.deepEqual(created.spec, { size: 3, color: 'red', max: 10 });
      assert.equal(created.metadata.generation, 1);

      const got: any = await custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        name: 'w1',
      });
      assert.deepEqual(got.spec, { size: 3, color: 'red', max: 10 });
      assert.equal(got.metadata.uid, created.metadata.uid);
    });

    void it('lists Widgets, with and without a labelSelector', async () => {
      await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w2', labels: { tier: 'b' } }, spec: { size: 1 } },
      });
      const all: any = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL });
      assert.equal(all.kind, 'WidgetList');
      assert.deepEqual(all.items.map((w: any) => w.metadata.name).sort(), ['w1', 'w2']);
      const some: any = await custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        labelSelector: 'tier=b',
      });
      assert.deepEqual(
        some.items.map((w: any) => w.metadata.name),
        ['w2'],
      );
    });

    void it('merge-patches a Widget spec and bumps its generation', async () => {
      const patched: any = await custom.patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'w1', body: { spec: { size: 5 } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      assert.deepEqual(patched.spec, { size: 5, color: 'red', max: 10 });
      assert.equal(patched.metadata.generation, 2);
    });

    void it('writes status through replaceNamespacedCustomObjectStatus without bumping generation', async () => {
      const cur: any = await custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        name: 'w1',
      });
      const gen = cur.metadata.generation as number;
      // A spec change sent to /status is ignored; only status is written.
      const updated: any = await custom.replaceNamespacedCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        name: 'w1',
        body: { ...cur, spec: { ...cur.spec, size: 9 }, status: { phase: 'Ready' } },
      });
      assert.deepEqual(updated.status, { phase: 'Ready' });
      assert.equal(updated.spec.size, 5);
      assert.equal(updated.metadata.generation, gen);
      assert.ok(Number(updated.metadata.resourceVersion) > Number(cur.metadata.resourceVersion));

      // A spec change through the main resource bumps generation and leaves status alone.
      const specChanged: any = await custom.replaceNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NS,
        plural: PLURAL,
        name: 'w1',
        body: { ...updated, spec: { ...updated.spec, size: 6 }, status: { phase: 'Ignored' } },
      });
      assert.equal(specChanged.spec.size, 6);
      assert.equal(specChanged.metadata.generation, gen + 1);
      assert.deepEqual(specChanged.status, { phase: 'Ready' });
    });

    void it('rejects a CEL-violating create with 422 naming the rule message', async () => {
      const e = await apiError(() =>
        custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: NS,
          plural: PLURAL,
          body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'too-big' }, spec: { size: 11 } },
        }),
      );
      assert.equal(e.code, 422);
      const status = statusOf(e);
      assert.equal(status.reason, 'Invalid');
      assert.match(status.message, /size must not exceed max/);
      assert.ok(
        (status.details?.causes ?? []).some((c: any) => String(c.message).includes('size must not exceed max')),
        `a cause names the rule message: ${JSON.stringify(status.details)}`,
      );
      const missing = await apiError(() =>
        custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'too-big' }),
      );
      assert.equal(missing.code, 404);
    });

    void it('deletes Widgets, after which getting one is a 404', async () => {
      await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'w1' });
      await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'w2' });
      const e = await apiError(() =>
        custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'w1' }),
      );
      assert.equal(e.code, 404);
      const list: any = await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL });
      assert.equal(list.items.length, 0);
    });
  });

  void describe('Watch', () => {
    void it(
      'delivers ADDED, MODIFIED and DELETED for a ConfigMap in order with increasing resourceVersions',
      { timeout: WATCH_TEST_TIMEOUT_MS },
      async () => {
        const start = await core.listNamespacedConfigMap({ namespace: NS });
        const w = await recordWatch(kc, `/api/v1/namespaces/${NS}/configmaps`, {
          resourceVersion: start.metadata!.resourceVersion!,
          fieldSelector: 'metadata.name=cn-watched',
        });
        try {
          await core.createNamespacedConfigMap({ namespace: NS, body: configMap('cn-watched', { v: '1' }) });
          await core.patchNamespacedConfigMap(
            { name: 'cn-watched', namespace: NS, body: { data: { v: '2' } } },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          );
          await core.deleteNamespacedConfigMap({ name: 'cn-watched', namespace: NS });
          await eventually(() => w.seen.length >= 3);
          assert.deepEqual(
            w.seen.map((e) => e.type),
            ['ADDED', 'MODIFIED', 'DELETED'],
          );
          assert.deepEqual(
            w.seen.map((e) => e.obj.data.v),
            ['1', '2', '2'],
          );
          const rvs = w.seen.map((e) => Number(e.obj.metadata.resourceVersion));
          assert.ok(rvs[0]! > Number(start.metadata!.resourceVersion), 'the first event is newer than the list it resumes from');
          assert.ok(rvs[0]! < rvs[1]! && rvs[1]! < rvs[2]!, `resourceVersions increase: ${rvs.join(', ')}`);
        } finally {
          w.stop();
        }
      },
    );

    void it('sends a BOOKMARK within about 3 s when allowWatchBookmarks is set', { timeout: WATCH_TEST_TIMEOUT_MS }, async () => {
      const start = await core.listNamespacedConfigMap({ namespace: NS });
      const w = await recordWatch(kc, `/api/v1/namespaces/${NS}/configmaps`, {
        resourceVersion: start.metadata!.resourceVersion!,
        allowWatchBookmarks: true,
      });
      try {
        const bm = await eventually(() => w.seen.find((e) => e.type === 'BOOKMARK'), 3000);
        assert.equal(bm.obj.kind, 'ConfigMap');
        assert.ok(Number(bm.obj.metadata.resourceVersion) >= Number(start.metadata!.resourceVersion));
        assert.equal(w.seen.filter((e) => e.type !== 'BOOKMARK').length, 0, 'nothing but bookmarks while idle');
      } finally {
        w.stop();
      }
    });

    void it('ends the watch with done() when the server ends it at timeoutSeconds', { timeout: WATCH_TEST_TIMEOUT_MS }, async () => {
      const start = await core.listNamespacedConfigMap({ namespace: NS });
      const w = await recordWatch(kc, `/api/v1/namespaces/${NS}/configmaps`, {
        resourceVersion: start.metadata!.resourceVersion!,
        timeoutSeconds: 1,
      });
      const t0 = Date.now();
      const err = await w.done;
      assert.equal(err, null);
      assert.ok(Date.now() - t0 < 4000);
    });
  });

  void describe('informer', () => {
    void it('fires add, update and delete for ConfigMaps and keeps its list in step', { timeout: WATCH_TEST_TIMEOUT_MS }, async () => {
      const informer = makeInformer<V1ConfigMap & KubernetesObject>(
        kc,
        `/api/v1/namespaces/${NS}/configmaps`,
        () => core.listNamespacedConfigMap({ namespace: NS }),
        'informed=yes',
      );
      const events: Array<[string, string, string | undefined]> = [];
      informer.on('add', (o) => events.push(['add', o.metadata!.name!, o.data?.['v']]));
      informer.on('update', (o) => events.push(['update', o.metadata!.name!, o.data?.['v']]));
      informer.on('delete', (o) => events.push(['delete', o.metadata!.name!, o.data?.['v']]));
      const errors: unknown[] = [];
      informer.on('error', (err) => errors.push(err));
      // An object that exists before the informer starts shows up as an add from the initial list.
      await core.createNamespacedConfigMap({ namespace: NS, body: configMap('inf-pre', { v: '0' }, { informed: 'yes' }) });
      await informer.start();
      try {
        await eventually(() => events.some((e) => e[0] === 'add' && e[1] === 'inf-pre'));
        assert.deepEqual(
          informer.list(NS).map((o) => o.metadata!.name),
          ['inf-pre'],
        );

        await core.createNamespacedConfigMap({ namespace: NS, body: configMap('inf-a', { v: '1' }, { informed: 'yes' }) });
        await core.createNamespacedConfigMap({ namespace: NS, body: configMap('inf-skip', { v: '1' }, { informed: 'no' }) });
        await eventually(() => events.some((e) => e[0] === 'add' && e[1] === 'inf-a'));
        assert.deepEqual(
          informer
            .list(NS)
            .map((o) => o.metadata!.name)
            .sort(),
          ['inf-a', 'inf-pre'],
        );
        assert.equal(informer.get('inf-a', NS)?.data?.['v'], '1');

        await core.patchNamespacedConfigMap(
          { name: 'inf-a', namespace: NS, body: { data: { v: '2' } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        await eventually(() => events.some((e) => e[0] === 'update' && e[1] === 'inf-a' && e[2] === '2'));
        assert.equal(informer.get('inf-a', NS)?.data?.['v'], '2');

        await core.deleteNamespacedConfigMap({ name: 'inf-a', namespace: NS });
        await eventually(() => events.some((e) => e[0] === 'delete' && e[1] === 'inf-a'));
        assert.deepEqual(
          informer.list(NS).map((o) => o.metadata!.name),
          ['inf-pre'],
        );
        assert.equal(informer.get('inf-a', NS), undefined);

        assert.deepEqual(events, [
          ['add', 'inf-pre', '0'],
          ['add', 'inf-a', '1'],
          ['update', 'inf-a', '2'],
          ['delete', 'inf-a', '2'],
        ]);
        assert.deepEqual(errors, []);
      } finally {
        await informer.stop();
        await core.deleteNamespacedConfigMap({ name: 'inf-pre', namespace: NS });
        await core.deleteNamespacedConfigMap({ name: 'inf-skip', namespace: NS });
      }
    });
  });

  void describe('server-side apply', () => {
    void it('applies a ConfigMap through patch with the apply Content-Type and records the field manager', async () => {
      const body = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cn-ssa' }, data: { k: 'v' } };
      const applied = await core.patchNamespacedConfigMap(
        { name: 'cn-ssa', namespace: NS, body, fieldManager: 'cn-test' },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
      assert.deepEqual(applied.data, { k: 'v' });
      const mf = applied.metadata?.managedFields ?? [];
      assert.deepEqual(
        mf.map((m) => [m.manager, m.operation]),
        [['cn-test', 'Apply']],
      );
      const again = await core.patchNamespacedConfigMap(
        { name: 'cn-ssa', namespace: NS, body, fieldManager: 'cn-test' },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
      assert.equal(again.metadata?.resourceVersion, applied.metadata?.resourceVersion, 'a no-op apply does not write');
      await core.deleteNamespacedConfigMap({ name: 'cn-ssa', namespace: NS });
    });
  });
});
