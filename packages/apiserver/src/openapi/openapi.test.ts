// /openapi/v2 (JSON and gnostic protobuf) and /openapi/v3 against a real server: the shapes kubectl
// reads (PATCH operations tagged with the GVK and fieldValidation, definitions with the GVK,
// schemas with descriptions), CRD schemas appearing, changing and disappearing, and every $ref resolving.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { parse as parseYaml } from 'yaml';
import { decodeGnosticDocument, encodeGnosticDocument } from './gnostic.js';
import { eventually, startTestServer, widgetCrd } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';

const PB = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';

/** Every $ref in a document, and whether it names something in `defs`. */
function danglingRefs(node: unknown, prefix: string, defs: Record<string, unknown>, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) danglingRefs(n, prefix, defs, out);
  else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && !(v.startsWith(prefix) && defs[v.slice(prefix.length)] !== undefined)) out.push(v);
      else danglingRefs(v, prefix, defs, out);
    }
  }
  return out;
}

void describe('OpenAPI documents', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => {
    await ts?.close();
  });

  function raw(path: string, accept: string): Promise<{ status: number; type: string; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        new URL(path, ts.client.url),
        { headers: { accept, authorization: `Bearer ${ts.client.token}` }, agent: ts.client.agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body: Buffer.concat(chunks) }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  void it('serves /openapi/v2 as gnostic protobuf with a PATCH operation per kind carrying its GVK and fieldValidation', async () => {
    const r = await raw('/openapi/v2', PB);
    assert.equal(r.status, 200);
    assert.equal(r.type, 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf');
    const doc = decodeGnosticDocument(r.body) as any;
    assert.equal(doc.swagger, '2.0');
    const item = doc.paths.path.find((p: any) => p.name === '/api/v1/namespaces/{namespace}/configmaps/{name}');
    assert.ok(item, 'configmap object path');
    const gvk = item.value.patch.vendor_extension.find((e: any) => e.name === 'x-kubernetes-group-version-kind');
    assert.deepEqual(parseYaml(gvk.value.yaml), { group: '', version: 'v1', kind: 'ConfigMap' });
    const names = item.value.patch.parameters.map(
      (p: any) => p.parameter.non_body_parameter?.query_parameter_sub_schema?.name ?? p.parameter.body_parameter?.name,
    );
    assert.ok(names.includes('fieldValidation'), JSON.stringify(names));
    const def = doc.definitions.additional_properties.find((d: any) => d.name === 'io.k8s.api.apps.v1.Deployment');
    const defGvk = def.value.vendor_extension.find((e: any) => e.name === 'x-kubernetes-group-version-kind');
    assert.deepEqual(parseYaml(defGvk.value.yaml), [{ group: 'apps', kind: 'Deployment', version: 'v1' }]);
  });

  void it('serves /openapi/v2 as JSON when asked, the same document as the protobuf', async () => {
    const j = await ts.client.get('/openapi/v2');
    assert.equal(j.status, 200);
    assert.deepEqual(danglingRefs(j.body, '#/definitions/', j.body.definitions), []);
    const fromJson = decodeGnosticDocument(encodeGnosticDocument(j.body));
    assert.deepEqual(fromJson, decodeGnosticDocument((await raw('/openapi/v2', PB)).body));
    // Patch strategies from the Go struct tags, which client-side apply reads.
    const containers = j.body.definitions['io.k8s.api.core.v1.PodSpec'].properties.containers;
    assert.equal(containers['x-kubernetes-patch-merge-key'], 'name');
    assert.equal(containers['x-kubernetes-patch-strategy'], 'merge');
  });

  void it('lists every group-version in /openapi/v3 and every $ref in each document resolves', async () => {
    const root = await ts.client.get('/openapi/v3');
    assert.equal(root.status, 200);
    const keys = Object.keys(root.body.paths);
    for (const k of ['api/v1', 'apis/apps/v1', 'apis/rbac.authorization.k8s.io/v1', 'apis/coordination.k8s.io/v1'])
      assert.ok(keys.includes(k), k);
    for (const k of keys) {
      const url: string = root.body.paths[k].serverRelativeURL;
      assert.match(url, /\?hash=[0-9A-F]{128}$/);
      const d = await ts.client.get(url);
      assert.equal(d.status, 200, url);
      assert.deepEqual(danglingRefs(d.body, '#/components/schemas/', d.body.components.schemas), [], url);
    }
    const core = (await ts.client.get('/openapi/v3/api/v1')).body;
    const cm = core.components.schemas['io.k8s.api.core.v1.ConfigMap'];
    assert.match(cm.properties.data.description, /configuration data/);
    assert.deepEqual(cm.properties.metadata.allOf, [{ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' }]);
  });

  void it('publishes a CRD schema in v2 and v3 once the CRD exists, changes the v3 hash when it changes, and drops it when deleted', async () => {
    assert.equal((await ts.client.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', widgetCrd())).status, 201);
    const hashOf = async (): Promise<string | undefined> =>
      (await ts.client.get('/openapi/v3')).body.paths['apis/example.com/v1']?.serverRelativeURL;
    const first = await eventually(hashOf, 5000);
    const doc = (await ts.client.get(first)).body;
    const w = doc.components.schemas['com.example.v1.Widget'];
    assert.deepEqual(w['x-kubernetes-group-version-kind'], [{ group: 'example.com', kind: 'Widget', version: 'v1' }]);
    assert.deepEqual(w.properties.spec.properties.color.enum, ['red', 'blue']);
    assert.ok(doc.components.schemas['io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta']);
    assert.ok((await ts.client.get('/openapi/v2')).body.definitions['com.example.v1.Widget']);

    const crd = (await ts.client.get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com')).body;
    crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.color.description = 'The colour.';
    assert.equal((await ts.client.put('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com', crd)).status, 200);
    const second = await eventually(async () => ((await hashOf()) !== first ? hashOf() : undefined), 5000);
    assert.equal(
      (await ts.client.get(second as string)).body.components.schemas['com.example.v1.Widget'].properties.spec.properties.color.description,
      'The colour.',
    );

    assert.equal((await ts.client.delete('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com')).status, 200);
    await eventually(async () => (await hashOf()) === undefined, 5000);
    assert.equal((await ts.client.get('/openapi/v2')).body.definitions['com.example.v1.Widget'], undefined);
    assert.equal((await ts.client.get('/openapi/v3/apis/example.com/v1')).status, 404);
  });
});
