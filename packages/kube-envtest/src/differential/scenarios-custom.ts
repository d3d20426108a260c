import { APPLY, del, JSON_PATCH, manifest, MERGE, patch, post, put } from './steps.js';
import type { Content } from './steps.js';
import type { RequestStep, Scenario } from './types.js';

const G = '/apis/diff.example.com/v1/namespaces/{{ns}}/gadgets';
const G2 = '/apis/diff.example.com/v2/namespaces/{{ns}}/gadgets';
/** The gadget most scenarios work on. */
const ITEM = `${G}/g`;
const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
const HOLD = 'diff.example.com/hold';

const gadget = (name: string, spec: Content = { size: 1 }, extra: Content = {}): Content => ({
  ...manifest('diff.example.com/v1', 'Gadget', { name, labels: { suite: 'diff' } }),
  spec,
  ...extra,
});

const create = (name: string, spec?: Content, extra: Partial<RequestStep> = {}): RequestStep => post(G, gadget(name, spec), extra);
/** The gadget `g` (with `spec`), created as setup. */
const existing = (spec?: Content, extra: Partial<RequestStep> = {}): RequestStep => create('g', spec, { setup: true, ...extra });
/** A merge patch of the gadget `g` (or its `/status`, …: `sub`). */
const merge = (body: Content, sub = '', extra: Partial<RequestStep> = {}): RequestStep => patch(`${ITEM}${sub}`, body, MERGE, extra);
/** A server-side apply to the gadget `g` by `manager` (and any further query: `b&force=true`). */
const apply = (manager: string, body: unknown, extra: Partial<RequestStep> = {}): RequestStep =>
  patch(`${ITEM}?fieldManager=${manager}`, body, APPLY, extra);
/** The gadget `g` held by a finalizer. */
const held = (extra: Partial<RequestStep> = {}): RequestStep =>
  post(G, { ...gadget('g'), metadata: { name: 'g', finalizers: [HOLD] } }, extra);

/** Custom resources: schema (pruning, defaulting, validation, CEL), status, SSA, tables, versions, finalizers. */
export function customScenarios(): Scenario[] {
  const s: Scenario[] = [];
  const add = (id: string, steps: Scenario['steps']): void => void s.push({ id: `custom/${id}`, steps });

  add('create-defaults', [create('g')]);
  add('get', [existing(), { path: ITEM }]);
  add('get-v2', [existing(), { path: `${G2}/g` }]);
  add('get-missing', [{ path: `${G}/nope` }]);
  add('list', [existing(), { path: G }]);
  add('list-table', [existing({ size: 2, mode: 'auto' }), { path: G, accept: TABLE }]);
  add('get-table', [existing(), { path: ITEM, accept: TABLE }]);
  add('get-table-includeObject-none', [existing(), { path: `${ITEM}?includeObject=None`, accept: TABLE }]);
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
  for (const v of ['Ignore', 'Warn', 'Strict']) {
    add(`prune-unknown-${v.toLowerCase()}`, [create('g', { size: 1, bogus: true }, { path: `${G}?fieldValidation=${v}` })]);
  }
  add('prune-unknown-default', [create('g', { size: 1, bogus: true, other: { x: 1 } })]);
  add('prune-unknown-top-level', [post(G, { ...gadget('g'), extra: 1 })]);
  add('unknown-metadata-field-strict', [post(`${G}?fieldValidation=Strict`, { ...gadget('g'), metadata: { name: 'g', bogusMeta: 1 } })]);
  // A body with a key twice: only as text (an object cannot hold it).
  const twice = '{"apiVersion":"diff.example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1,"size":2}}';
  for (const v of ['Strict', 'Warn']) add(`duplicate-field-${v.toLowerCase()}`, [post(`${G}?fieldValidation=${v}`, twice)]);
  add('invalid-field-validation-value', [create('g', undefined, { path: `${G}?fieldValidation=Sometimes` })]);
  add('cel-transition-allowed', [existing({ size: 1, mode: 'open' }), merge({ spec: { mode: 'locked' } })]);
  add('cel-transition-refused', [existing({ size: 1, mode: 'locked' }), merge({ spec: { mode: 'open' } })]);
  add('cel-immutable', [existing({ size: 1, immutable: 'a' }), merge({ spec: { immutable: 'b' } })]);
  add('update-bumps-generation', [existing(), merge({ spec: { size: 2 } }), merge({ metadata: { labels: { x: 'y' } } })]);
  add('status-write', [existing(), merge({ status: { phase: 'Ready' } }, '/status'), { path: `${ITEM}/status` }]);
  add('status-write-ignores-spec', [existing(), merge({ spec: { size: 5 }, status: { count: 1 } }, '/status')]);
  add('main-write-ignores-status', [existing(), merge({ spec: { size: 3 }, status: { phase: 'Sneaky' } })]);
  add('create-with-status-dropped', [post(G, gadget('g', { size: 1 }, { status: { phase: 'Given' } }))]);
  const savingRv = { save: { rv: 'metadata.resourceVersion' } };
  /** The gadget `g` as a PUT body conditional on the saved `{{rv}}`. */
  const atRv = (rest: Content = {}): Content => ({ ...gadget('g'), metadata: { name: 'g', resourceVersion: '{{rv}}' }, ...rest });
  add('status-put', [existing(undefined, savingRv), put(`${ITEM}/status`, atRv({ status: { phase: 'P' } }))]);
  add('status-missing-object', [patch(`${G}/nope/status`, { status: { phase: 'x' } }, MERGE)]);
  add('update-stale', [existing(undefined, savingRv), merge({ spec: { size: 2 } }, '', { setup: true }), put(ITEM, atRv())]);
  add('update-without-rv', [existing(), put(ITEM, gadget('g', { size: 4 }))]);
  const setSize = (value: number): RequestStep => patch(ITEM, [{ op: 'replace', path: '/spec/size', value }], JSON_PATCH);
  add('patch-json', [existing(), setSize(7)]);
  add('patch-json-invalid-result', [existing(), setSize(70)]);
  add('patch-strategic-refused', [existing(), patch(ITEM, { spec: { size: 2 } }, 'application/strategic-merge-patch+json')]);
  add('patch-merge-null-deletes', [existing({ size: 1, name: 'abc' }), merge({ spec: { name: null } })]);
  add('apply-create', [apply('a', gadget('g', { size: 1, ports: [{ name: 'http', port: 80 }] }))]);
  const applied = (size: number): RequestStep => apply('a', gadget('g', { size }), { setup: true });
  add('apply-conflict', [applied(1), apply('b', gadget('g', { size: 2 }))]);
  add('apply-force', [applied(1), apply('b&force=true', gadget('g', { size: 2 }))]);
  add('apply-shared-ownership', [applied(1), apply('b', gadget('g', { size: 1 }))]);
  add('apply-list-map-ownership', [
    apply('a', gadget('g', { size: 1, ports: [{ name: 'a', port: 1 }] }), { setup: true }),
    apply('b', gadget('g', { size: 1, ports: [{ name: 'b', port: 2 }] })),
  ]);
  add('apply-release-field', [apply('a', gadget('g', { size: 1, name: 'abc' }), { setup: true }), apply('a', gadget('g', { size: 1 }))]);
  const createdByUpdate = existing({ size: 1 }, { path: `${G}?fieldManager=creator` });
  add('apply-after-update-handover', [
    createdByUpdate,
    apply('applier', gadget('g', { size: 1 })),
    apply('applier', gadget('g', { size: 2 })),
  ]);
  add('apply-update-conflict-with-updater', [createdByUpdate, apply('applier', gadget('g', { size: 2 }))]);
  add('apply-status', [
    existing(),
    patch(`${ITEM}/status?fieldManager=st`, manifest('diff.example.com/v1', 'Gadget', { name: 'g' }, { status: { phase: 'Up' } }), APPLY),
  ]);
  add('apply-invalid', [apply('a', gadget('g', { size: -5 }))]);
  add('apply-dry-run', [apply('a&dryRun=All', gadget('g')), { path: ITEM }]);
  add('apply-force-without-apply', [existing(), patch(`${ITEM}?force=true`, { spec: { size: 2 } }, MERGE)]);
  add('apply-json-body', [apply('a', JSON.stringify(gadget('g')))]);
  add('finalizer-holds-delete', [
    held(),
    del(ITEM),
    { path: ITEM },
    merge({ spec: { size: 2 } }),
    del(ITEM),
    merge({ metadata: { finalizers: null } }),
    { path: ITEM },
  ]);
  add('finalizer-add-while-deleting', [
    held({ setup: true }),
    del(ITEM, { setup: true }),
    merge({ metadata: { finalizers: [HOLD, 'diff.example.com/more'] } }),
  ]);
  add('delete', [existing(), del(ITEM)]);
  add('delete-missing', [del(ITEM)]);
  add('delete-stale-precondition', [
    existing(),
    del(ITEM, { body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { resourceVersion: '1' } } }),
  ]);
  const setupCreate = (name: string): RequestStep => create(name, undefined, { setup: true });
  add('deletecollection', [setupCreate('a'), setupCreate('b'), del(`${G}?labelSelector=suite%3Ddiff`), { path: G }]);
  add('deletecollection-dry-run', [setupCreate('a'), del(`${G}?dryRun=All`), { path: G }]);
  add('protobuf-refused', [post(G, Buffer.from([0x6b, 0x38, 0x73, 0]), { contentType: 'application/vnd.kubernetes.protobuf' })]);
  const knob = (name: string, rest?: Content): Content => manifest('diff.example.com/v1', 'Knob', { name }, rest);
  add('cluster-scoped-create', [
    post('/apis/diff.example.com/v1/knobs', knob('diff-knob-1', { spec: { level: 1 } })),
    del('/apis/diff.example.com/v1/knobs/diff-knob-1'),
  ]);
  add('cluster-scoped-in-namespace-path', [post('/apis/diff.example.com/v1/namespaces/{{ns}}/knobs', knob('diff-knob-2'))]);
  add('namespaced-cluster-wide-list', [
    existing(),
    { path: '/apis/diff.example.com/v1/gadgets?labelSelector=suite%3Ddiff&fieldSelector=metadata.namespace%3D{{ns}}' },
  ]);
  add('namespace-mismatch', [post(G, { ...gadget('g'), metadata: { name: 'g', namespace: 'elsewhere' } })]);
  add('create-in-missing-namespace', [post('/apis/diff.example.com/v1/namespaces/no-such-ns-diff/gadgets', gadget('g'))]);

  // The kars kinds from deploy/crds: a sample of each, and what their schemas refuse.
  const kars = '/apis/kars.azure.com/v1alpha1/namespaces/{{ns}}';
  /** A POST to `${kars}/<collection>` of a kars object named `name` with `spec`. */
  const karsCreate = (collection: string, kind: string, name: string, spec: Content): RequestStep =>
    post(`${kars}/${collection}`, manifest('kars.azure.com/v1alpha1', kind, { name }, { spec }));
  add('kars/inferencepolicy-create', [
    karsCreate('inferencepolicies', 'InferencePolicy', 'ip', { tokenBudget: { perRequestTokens: 100 } }),
  ]);
  add('kars/inferencepolicy-invalid', [
    karsCreate('inferencepolicies', 'InferencePolicy', 'ip', { tokenBudget: { perRequestTokens: -1 } }),
  ]);
  add('kars/karssandbox-unknown-field-strict', [
    karsCreate('karssandboxes?fieldValidation=Strict', 'KarsSandbox', 'sb', { inferenceREF: { name: 'x' } }),
  ]);
  add('kars/toolpolicy-empty', [karsCreate('toolpolicies', 'ToolPolicy', 'tp', {})]);
  add('kars/egressapproval-create', [
    karsCreate('egressapprovals', 'EgressApproval', 'ea', { sandbox: 'demo', hosts: ['example.com:443'], ttl: 'PT1H', reason: 'test' }),
  ]);
  add('kars/list-table', [{ path: `${kars}/inferencepolicies`, accept: TABLE }]);
  return s;
}
