import type { RequestStep, Scenario } from './types.js';

const G = '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets';
const G2 = '/apis/diff.example.com/v2/namespaces/{{ns}}/gadgets';
const MERGE = 'application/merge-patch+json';
const APPLY = 'application/apply-patch+yaml';
const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';

const gadget = (
  name: string,
  spec: Record<string, unknown> = { size: 1 },
  extra: Record<string, unknown> = {},
): Record<string, unknown> => ({
  apiVersion: 'diff.example.com/v1',
  kind: 'Gadget',
  metadata: { name, labels: { suite: 'diff' } },
  spec,
  ...extra,
});

const create = (name: string, spec?: Record<string, unknown>, extra: Partial<RequestStep> = {}): RequestStep => ({
  method: 'POST',
  path: G,
  body: gadget(name, spec),
  ...extra,
});

/** Custom resources: schema (pruning, defaulting, validation, CEL), status, SSA, tables, versions, finalizers. */
export function customScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Scenario['steps']): void => void s.push({ id: `custom/${id}`, steps });

  add('create-defaults', [create('g')]);
  add('get', [create('g', undefined, { setup: true }), { path: `${G}/g` }]);
  add('get-v2', [create('g', undefined, { setup: true }), { path: `${G2}/g` }]);
  add('get-missing', [{ path: `${G}/nope` }]);
  add('list', [create('g', undefined, { setup: true }), { path: G }]);
  add('list-table', [create('g', { size: 2, mode: 'auto' }, { setup: true }), { path: G, accept: TABLE }]);
  add('get-table', [create('g', undefined, { setup: true }), { path: `${G}/g`, accept: TABLE }]);
  add('get-table-includeObject-none', [create('g', undefined, { setup: true }), { path: `${G}/g?includeObject=None`, accept: TABLE }]);
  add('create-missing-required', [create('g', { max: 3 })]);
  add('create-minimum', [create('g', { size: -1 })]);
  add('create-enum', [create('g', { size: 1, mode: 'weird' })]);
  add('create-pattern-and-length', [create('g', { size: 1, name: 'ABCDEFGHIJK' })]);
  add('create-max-items', [create('g', { size: 1, tags: ['a', 'b', 'c', 'd'] })]);
  add('create-wrong-type', [create('g', { size: 'big' })]);
  add('create-cel-rule', [create('g', { size: 20, max: 5 })]);
  add('create-several-errors', [create('g', { size: -1, mode: 'x', name: '123' })]);
  add('create-int-or-string', [create('g', { size: 1, port: 'http' }), create('g2', { size: 1, port: 80 })]);
  add('create-preserve-unknown', [create('g', { size: 1, free: { any: { thing: [1, 2] } } })]);
  add('prune-unknown-ignore', [create('g', { size: 1, bogus: true }, { path: `${G}?fieldValidation=Ignore` })]);
  add('prune-unknown-warn', [create('g', { size: 1, bogus: true }, { path: `${G}?fieldValidation=Warn` })]);
  add('prune-unknown-strict', [create('g', { size: 1, bogus: true }, { path: `${G}?fieldValidation=Strict` })]);
  add('prune-unknown-default', [create('g', { size: 1, bogus: true, other: { x: 1 } })]);
  add('prune-unknown-top-level', [{ method: 'POST', path: G, body: { ...gadget('g'), extra: 1 } }]);
  add('unknown-metadata-field-strict', [
    { method: 'POST', path: `${G}?fieldValidation=Strict`, body: { ...gadget('g'), metadata: { name: 'g', bogusMeta: 1 } } },
  ]);
  add('duplicate-field-strict', [
    {
      method: 'POST',
      path: `${G}?fieldValidation=Strict`,
      body: '{"apiVersion":"diff.example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1,"size":2}}',
    },
  ]);
  add('duplicate-field-warn', [
    {
      method: 'POST',
      path: `${G}?fieldValidation=Warn`,
      body: '{"apiVersion":"diff.example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1,"size":2}}',
    },
  ]);
  add('invalid-field-validation-value', [create('g', undefined, { path: `${G}?fieldValidation=Sometimes` })]);
  add('cel-transition-allowed', [
    create('g', { size: 1, mode: 'open' }, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { mode: 'locked' } }, contentType: MERGE },
  ]);
  add('cel-transition-refused', [
    create('g', { size: 1, mode: 'locked' }, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { mode: 'open' } }, contentType: MERGE },
  ]);
  add('cel-immutable', [
    create('g', { size: 1, immutable: 'a' }, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { immutable: 'b' } }, contentType: MERGE },
  ]);
  add('update-bumps-generation', [
    create('g', undefined, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { size: 2 } }, contentType: MERGE },
    { method: 'PATCH', path: `${G}/g`, body: { metadata: { labels: { x: 'y' } } }, contentType: MERGE },
  ]);
  add('status-write', [
    create('g', undefined, { setup: true }),
    { method: 'PATCH', path: `${G}/g/status`, body: { status: { phase: 'Ready' } }, contentType: MERGE },
    { path: `${G}/g/status` },
  ]);
  add('status-write-ignores-spec', [
    create('g', undefined, { setup: true }),
    { method: 'PATCH', path: `${G}/g/status`, body: { spec: { size: 5 }, status: { count: 1 } }, contentType: MERGE },
  ]);
  add('main-write-ignores-status', [
    create('g', undefined, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { size: 3 }, status: { phase: 'Sneaky' } }, contentType: MERGE },
  ]);
  add('create-with-status-dropped', [{ method: 'POST', path: G, body: gadget('g', { size: 1 }, { status: { phase: 'Given' } }) }]);
  add('status-put', [
    create('g', undefined, { setup: true, save: { rv: 'metadata.resourceVersion' } }),
    {
      method: 'PUT',
      path: `${G}/g/status`,
      body: { ...gadget('g'), metadata: { name: 'g', resourceVersion: '{{rv}}' }, status: { phase: 'P' } },
    },
  ]);
  add('status-missing-object', [{ method: 'PATCH', path: `${G}/nope/status`, body: { status: { phase: 'x' } }, contentType: MERGE }]);
  add('update-stale', [
    create('g', undefined, { setup: true, save: { rv: 'metadata.resourceVersion' } }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { size: 2 } }, contentType: MERGE, setup: true },
    { method: 'PUT', path: `${G}/g`, body: { ...gadget('g'), metadata: { name: 'g', resourceVersion: '{{rv}}' } } },
  ]);
  add('update-without-rv', [create('g', undefined, { setup: true }), { method: 'PUT', path: `${G}/g`, body: gadget('g', { size: 4 }) }]);
  add('patch-json', [
    create('g', undefined, { setup: true }),
    {
      method: 'PATCH',
      path: `${G}/g`,
      body: [{ op: 'replace', path: '/spec/size', value: 7 }],
      contentType: 'application/json-patch+json',
    },
  ]);
  add('patch-json-invalid-result', [
    create('g', undefined, { setup: true }),
    {
      method: 'PATCH',
      path: `${G}/g`,
      body: [{ op: 'replace', path: '/spec/size', value: 70 }],
      contentType: 'application/json-patch+json',
    },
  ]);
  add('patch-strategic-refused', [
    create('g', undefined, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { size: 2 } }, contentType: 'application/strategic-merge-patch+json' },
  ]);
  add('patch-merge-null-deletes', [
    create('g', { size: 1, name: 'abc' }, { setup: true }),
    { method: 'PATCH', path: `${G}/g`, body: { spec: { name: null } }, contentType: MERGE },
  ]);
  add('apply-create', [
    {
      method: 'PATCH',
      path: `${G}/g?fieldManager=a`,
      body: gadget('g', { size: 1, ports: [{ name: 'http', port: 80 }] }),
      contentType: APPLY,
    },
  ]);
  add('apply-conflict', [
    { method: 'PATCH', path: `${G}/g?fieldManager=a`, body: gadget('g', { size: 1 }), contentType: APPLY, setup: true },
    { method: 'PATCH', path: `${G}/g?fieldManager=b`, body: gadget('g', { size: 2 }), contentType: APPLY },
  ]);
  add('apply-force', [
    { method: 'PATCH', path: `${G}/g?fieldManager=a`, body: gadget('g', { size: 1 }), contentType: APPLY, setup: true },
    { method: 'PATCH', path: `${G}/g?fieldManager=b&force=true`, body: gadget('g', { size: 2 }), contentType: APPLY },
  ]);
  add('apply-shared-ownership', [
    { method: 'PATCH', path: `${G}/g?fieldManager=a`, body: gadget('g', { size: 1 }), contentType: APPLY, setup: true },
    { method: 'PATCH', path: `${G}/g?fieldManager=b`, body: gadget('g', { size: 1 }), contentType: APPLY },
  ]);
  add('apply-list-map-ownership', [
    {
      method: 'PATCH',
      path: `${G}/g?fieldManager=a`,
      body: gadget('g', { size: 1, ports: [{ name: 'a', port: 1 }] }),
      contentType: APPLY,
      setup: true,
    },
    { method: 'PATCH', path: `${G}/g?fieldManager=b`, body: gadget('g', { size: 1, ports: [{ name: 'b', port: 2 }] }), contentType: APPLY },
  ]);
  add('apply-release-field', [
    { method: 'PATCH', path: `${G}/g?fieldManager=a`, body: gadget('g', { size: 1, name: 'abc' }), contentType: APPLY, setup: true },
    { method: 'PATCH', path: `${G}/g?fieldManager=a`, body: gadget('g', { size: 1 }), contentType: APPLY },
  ]);
  add('apply-after-update-handover', [
    create('g', { size: 1 }, { path: `${G}?fieldManager=creator`, setup: true }),
    { method: 'PATCH', path: `${G}/g?fieldManager=applier`, body: gadget('g', { size: 1 }), contentType: APPLY },
    { method: 'PATCH', path: `${G}/g?fieldManager=applier`, body: gadget('g', { size: 2 }), contentType: APPLY },
  ]);
  add('apply-update-conflict-with-updater', [
    create('g', { size: 1 }, { path: `${G}?fieldManager=creator`, setup: true }),
    { method: 'PATCH', path: `${G}/g?fieldManager=applier`, body: gadget('g', { size: 2 }), contentType: APPLY },
  ]);
  add('apply-status', [
    create('g', undefined, { setup: true }),
    {
      method: 'PATCH',
      path: `${G}/g/status?fieldManager=st`,
      body: { apiVersion: 'diff.example.com/v1', kind: 'Gadget', metadata: { name: 'g' }, status: { phase: 'Up' } },
      contentType: APPLY,
    },
  ]);
  add('apply-invalid', [{ method: 'PATCH', path: `${G}/g?fieldManager=a`, body: gadget('g', { size: -5 }), contentType: APPLY }]);
  add('apply-dry-run', [
    { method: 'PATCH', path: `${G}/g?fieldManager=a&dryRun=All`, body: gadget('g'), contentType: APPLY },
    { path: `${G}/g` },
  ]);
  add('apply-force-without-apply', [
    create('g', undefined, { setup: true }),
    { method: 'PATCH', path: `${G}/g?force=true`, body: { spec: { size: 2 } }, contentType: MERGE },
  ]);
  add('apply-json-body', [{ method: 'PATCH', path: `${G}/g?fieldManager=a`, body: JSON.stringify(gadget('g')), contentType: APPLY }]);
  add('finalizer-holds-delete', [
    { method: 'POST', path: G, body: { ...gadget('g'), metadata: { name: 'g', finalizers: ['diff.example.com/hold'] } } },
    { method: 'DELETE', path: `${G}/g` },
    { path: `${G}/g` },
    { method: 'PATCH', path: `${G}/g`, body: { spec: { size: 2 } }, contentType: MERGE },
    { method: 'DELETE', path: `${G}/g` },
    { method: 'PATCH', path: `${G}/g`, body: { metadata: { finalizers: null } }, contentType: MERGE },
    { path: `${G}/g` },
  ]);
  add('finalizer-add-while-deleting', [
    { method: 'POST', path: G, body: { ...gadget('g'), metadata: { name: 'g', finalizers: ['diff.example.com/hold'] } }, setup: true },
    { method: 'DELETE', path: `${G}/g`, setup: true },
    {
      method: 'PATCH',
      path: `${G}/g`,
      body: { metadata: { finalizers: ['diff.example.com/hold', 'diff.example.com/more'] } },
      contentType: MERGE,
    },
  ]);
  add('delete', [create('g', undefined, { setup: true }), { method: 'DELETE', path: `${G}/g` }]);
  add('delete-missing', [{ method: 'DELETE', path: `${G}/g` }]);
  add('delete-stale-precondition', [
    create('g', undefined, { setup: true }),
    { method: 'DELETE', path: `${G}/g`, body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { resourceVersion: '1' } } },
  ]);
  add('deletecollection', [
    create('a', undefined, { setup: true }),
    create('b', undefined, { setup: true }),
    { method: 'DELETE', path: `${G}?labelSelector=suite%3Ddiff` },
    { path: G },
  ]);
  add('deletecollection-dry-run', [create('a', undefined, { setup: true }), { method: 'DELETE', path: `${G}?dryRun=All` }, { path: G }]);
  add('protobuf-refused', [
    { method: 'POST', path: G, body: Buffer.from([0x6b, 0x38, 0x73, 0]), contentType: 'application/vnd.kubernetes.protobuf' },
  ]);
  add('cluster-scoped-create', [
    {
      method: 'POST',
      path: '/apis/diff.example.com/v1/knobs',
      body: { apiVersion: 'diff.example.com/v1', kind: 'Knob', metadata: { name: 'diff-knob-1' }, spec: { level: 1 } },
    },
    { method: 'DELETE', path: '/apis/diff.example.com/v1/knobs/diff-knob-1' },
  ]);
  add('cluster-scoped-in-namespace-path', [
    {
      method: 'POST',
      path: '/apis/diff.example.com/v1/namespaces/{{ns}}/knobs',
      body: { apiVersion: 'diff.example.com/v1', kind: 'Knob', metadata: { name: 'diff-knob-2' } },
    },
  ]);
  add('namespaced-cluster-wide-list', [
    create('g', undefined, { setup: true }),
    { path: '/apis/diff.example.com/v1/gadgets?labelSelector=suite%3Ddiff&fieldSelector=metadata.namespace%3D{{ns}}' },
  ]);
  add('namespace-mismatch', [{ method: 'POST', path: G, body: { ...gadget('g'), metadata: { name: 'g', namespace: 'elsewhere' } } }]);
  add('create-in-missing-namespace', [
    { method: 'POST', path: '/apis/diff.example.com/v1/namespaces/no-such-ns-diff/gadgets', body: gadget('g') },
  ]);

  // The kars kinds from deploy/crds: a sample of each, and what their schemas refuse.
  const kars = '/apis/kars.azure.com/v1alpha1/namespaces/{{ns}}';
  add('kars/inferencepolicy-create', [
    {
      method: 'POST',
      path: `${kars}/inferencepolicies`,
      body: {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'InferencePolicy',
        metadata: { name: 'ip' },
        spec: { tokenBudget: { perRequestTokens: 100 } },
      },
    },
  ]);
  add('kars/inferencepolicy-invalid', [
    {
      method: 'POST',
      path: `${kars}/inferencepolicies`,
      body: {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'InferencePolicy',
        metadata: { name: 'ip' },
        spec: { tokenBudget: { perRequestTokens: -1 } },
      },
    },
  ]);
  add('kars/karssandbox-unknown-field-strict', [
    {
      method: 'POST',
      path: `${kars}/karssandboxes?fieldValidation=Strict`,
      body: { apiVersion: 'kars.azure.com/v1alpha1', kind: 'KarsSandbox', metadata: { name: 'sb' }, spec: { inferenceREF: { name: 'x' } } },
    },
  ]);
  add('kars/toolpolicy-empty', [
    {
      method: 'POST',
      path: `${kars}/toolpolicies`,
      body: { apiVersion: 'kars.azure.com/v1alpha1', kind: 'ToolPolicy', metadata: { name: 'tp' }, spec: {} },
    },
  ]);
  add('kars/egressapproval-create', [
    {
      method: 'POST',
      path: `${kars}/egressapprovals`,
      body: {
        apiVersion: 'kars.azure.com/v1alpha1',
        kind: 'EgressApproval',
        metadata: { name: 'ea' },
        spec: { sandbox: 'demo', hosts: ['example.com:443'], ttl: 'PT1H', reason: 'test' },
      },
    },
  ]);
  add('kars/list-table', [{ path: `${kars}/inferencepolicies`, accept: TABLE }]);
  return s;
}
