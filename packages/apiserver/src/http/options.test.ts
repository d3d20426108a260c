// Regression tests for the request-option checks the differential suite (issue 19) found missing:
// kars apiserver ignored or loosely refused bad dryRun, fieldManager, fieldValidation, force,
// propagationPolicy, resourceVersion, resourceVersionMatch and sendInitialEvents values that
// kube-apiserver refuses. Watches carry timeoutSeconds so that a missing check fails the test, not hangs it. Each expected answer is kube-apiserver v1.34's, as recorded in
// packages/kube-envtest/fixtures/differential/kube-v1.34.4.json.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { ApiError, goQuote } from '@kars/kube-core';
import { createCrds, startTestServer, widgetCrd } from '../testing/harness.js';
import type { TestServer } from '../testing/harness.js';
import { requestedRevision } from './options.js';

const CM = '/api/v1/namespaces/default/configmaps';
const WD = '/apis/example.com/v1/namespaces/default/widgets';
const cm = (name: string): Record<string, unknown> => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { k: 'v' } });

/** The 422 kube answers for invalid options of `kind`, with one cause per `[field, reason, message]`. */
function optionsInvalid(kind: string, causes: [string, string, string][]): Record<string, unknown> {
  const texts = causes.map(([f, , m]) => `${f}: ${m}`);
  return {
    apiVersion: 'v1',
    kind: 'Status',
    metadata: {},
    status: 'Failure',
    reason: 'Invalid',
    code: 422,
    message: `${kind}.meta.k8s.io "" is invalid: ${texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`}`,
    details: { group: 'meta.k8s.io', kind, causes: causes.map(([field, reason, message]) => ({ reason, field, message })) },
  };
}

describe('request options are validated as kube-apiserver validates them', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, widgetCrd());
  });
  after(async () => ts.close());

  it('create: dryRun, fieldManager and fieldValidation, in kube order, before anything is stored', async () => {
    const dry = await ts.client.post(`${CM}?dryRun=Some`, cm('a'));
    assert.deepEqual(
      dry.body,
      optionsInvalid('CreateOptions', [['dryRun', 'FieldValueNotSupported', 'Unsupported value: ["Some"]: supported values: "All"']]),
    );
    const long = await ts.client.post(`${CM}?fieldManager=${'m'.repeat(129)}`, cm('a'));
    assert.deepEqual(
      long.body,
      optionsInvalid('CreateOptions', [['fieldManager', 'FieldValueTooLong', 'Too long: may not be more than 128 bytes']]),
    );
    const fv = await ts.client.post(`${CM}?fieldValidation=Sometimes`, cm('a'));
    assert.deepEqual(
      fv.body,
      optionsInvalid('CreateOptions', [
        ['fieldValidation', 'FieldValueNotSupported', 'Unsupported value: "Sometimes": supported values: "", "Ignore", "Strict", "Warn"'],
      ]),
    );
    const both = await ts.client.post(`${CM}?dryRun=x&fieldManager=${'m'.repeat(200)}`, cm('a'));
    assert.deepEqual(
      both.body,
      optionsInvalid('CreateOptions', [
        ['fieldManager', 'FieldValueTooLong', 'Too long: may not be more than 128 bytes'],
        ['dryRun', 'FieldValueNotSupported', 'Unsupported value: ["x"]: supported values: "All"'],
      ]),
    );
    assert.equal((await ts.client.get(`${CM}/a`)).status, 404, 'nothing was stored');
    assert.equal((await ts.client.post(`${CM}?fieldManager=${'m'.repeat(128)}&dryRun=All`, cm('a'))).status, 201);
    // Every character must be printable (Go's unicode.IsPrint); each other one is a cause, at its byte offset, the value quoted as Go quotes it.
    const bell = await ts.client.post(`${CM}?fieldManager=${encodeURIComponent('é\x07m\u0085')}`, cm('a'));
    assert.deepEqual(
      bell.body,
      optionsInvalid('CreateOptions', [
        ['fieldManager', 'FieldValueInvalid', 'Invalid value: "é\\am\\u0085": invalid character U+0007 (at position 2)'],
        ['fieldManager', 'FieldValueInvalid', 'Invalid value: "é\\am\\u0085": invalid character U+0085 (at position 4)'],
      ]),
    );
    // A multi-byte manager counts in bytes: 43 three-byte characters are 129 bytes.
    assert.equal((await ts.client.post(`${CM}?fieldManager=${encodeURIComponent('€'.repeat(43))}`, cm('a'))).status, 422);
  });

  it('update names UpdateOptions; a non-apply patch may not set force, whatever its value', async () => {
    assert.equal((await ts.client.post(CM, cm('u'))).status, 201);
    const put = await ts.client.put(`${CM}/u?dryRun=Nope`, cm('u'));
    assert.deepEqual(
      put.body,
      optionsInvalid('UpdateOptions', [['dryRun', 'FieldValueNotSupported', 'Unsupported value: ["Nope"]: supported values: "All"']]),
    );
    for (const force of ['true', 'false']) {
      const p = await ts.client.patch(`${CM}/u`, { data: { k: 'w' } }, 'merge', `?force=${force}`);
      assert.deepEqual(
        p.body,
        optionsInvalid('PatchOptions', [['force', 'FieldValueForbidden', 'Forbidden: may not be specified for non-apply patch']]),
      );
    }
    assert.equal((await ts.client.get(`${CM}/u`)).body.data.k, 'v', 'the refused patches changed nothing');
    const apply = await ts.client.patch(`${CM}/u`, cm('u'), 'apply', '?fieldManager=t&force=true');
    assert.equal(apply.status, 200, apply.text);
  });

  it('delete: an unknown propagationPolicy, from the query or the body, is refused and deletes nothing', async () => {
    assert.equal((await ts.client.post(CM, cm('d'))).status, 201);
    const expected = optionsInvalid('DeleteOptions', [
      [
        'propagationPolicy',
        'FieldValueNotSupported',
        'Unsupported value: "Sometimes": supported values: "Foreground", "Background", "Orphan", "nil"',
      ],
    ]);
    assert.deepEqual((await ts.client.request('DELETE', `${CM}/d?propagationPolicy=Sometimes`)).body, expected);
    const body = { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Sometimes' };
    assert.deepEqual((await ts.client.request('DELETE', `${CM}/d`, body)).body, expected);
    assert.equal((await ts.client.get(`${CM}/d`)).status, 200);
    assert.equal((await ts.client.request('DELETE', `${CM}/d?propagationPolicy=Orphan`)).status, 200);
  });

  it('list: resourceVersion must be a revision, resourceVersionMatch needs one, and a future one times out', async () => {
    const noRv = await ts.client.get(`${CM}?resourceVersionMatch=NotOlderThan`);
    assert.deepEqual(
      noRv.body,
      optionsInvalid('ListOptions', [
        ['resourceVersionMatch', 'FieldValueForbidden', 'Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided'],
      ]),
    );
    const bad = await ts.client.get(`${CM}?resourceVersion=1&resourceVersionMatch=Sometime`);
    assert.deepEqual(
      bad.body,
      optionsInvalid('ListOptions', [
        ['resourceVersionMatch', 'FieldValueNotSupported', 'Unsupported value: "Sometime": supported values: "Exact", "NotOlderThan", ""'],
      ]),
    );
    const nan = await ts.client.get(`${CM}?resourceVersion=abc`);
    assert.equal(nan.status, 400);
    assert.equal(nan.body.reason, 'BadRequest');
    assert.equal(
      nan.body.message,
      'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
    );
    const initial = await ts.client.get(`${CM}?sendInitialEvents=true`);
    assert.equal(initial.status, 422);
    assert.equal(initial.body.details.causes[0].message, 'Forbidden: sendInitialEvents is forbidden for list');
    const current = Number((await ts.client.get(CM)).body.metadata.resourceVersion);
    assert.equal((await ts.client.get(`${CM}?resourceVersion=${current}&resourceVersionMatch=NotOlderThan`)).status, 200);
    const future = await ts.client.get(`${CM}?resourceVersion=${current + 1000}&resourceVersionMatch=Exact`);
    assert.equal(future.status, 504, future.text);
    assert.equal(future.body.reason, 'Timeout');
    assert.match(future.body.message, /^Timeout: Too large resource version: \d+, current: \d+$/);
  });

  it('watch: a resourceVersion that is not a revision is a reasonless 500; sendInitialEvents needs NotOlderThan', async () => {
    const nan = await ts.client.get(`${CM}?watch=true&timeoutSeconds=2&resourceVersion=abc`);
    assert.equal(nan.status, 500);
    assert.equal(nan.body.reason, undefined);
    assert.equal(nan.body.message, 'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax');
    const initial = await ts.client.get(`${WD}?watch=true&timeoutSeconds=2&sendInitialEvents=true&allowWatchBookmarks=true`);
    assert.deepEqual(
      initial.body,
      optionsInvalid('ListOptions', [
        [
          'resourceVersionMatch',
          'FieldValueForbidden',
          'Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
        ],
      ]),
    );
    const matchOnly = await ts.client.get(`${CM}?watch=true&timeoutSeconds=2&resourceVersionMatch=NotOlderThan`);
    assert.equal(matchOnly.status, 422);
    assert.equal(
      matchOnly.body.details.causes[0].message,
      'Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
    );
  });

  it('field selectors: each kind its own labels, with the message kube gives for it, in lists, watches and deletecollection', async () => {
    const unknownDefault = await ts.client.get(`${CM}?fieldSelector=${encodeURIComponent('data.k=v')}`);
    assert.equal(unknownDefault.status, 400);
    assert.equal(unknownDefault.body.message, '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"');
    const cr = await ts.client.get(`${WD}?fieldSelector=${encodeURIComponent('metadata.name=w,spec.size=1')}`);
    assert.equal(cr.status, 400);
    assert.equal(cr.body.message, 'field label not supported: spec.size');
    assert.equal((await ts.client.get(`${WD}?fieldSelector=${encodeURIComponent('metadata.namespace=default')}`)).status, 200);
    const secrets = '/api/v1/namespaces/default/secrets';
    assert.equal((await ts.client.get(`${secrets}?fieldSelector=${encodeURIComponent('type=Opaque')}`)).status, 200);
    assert.equal(
      (await ts.client.get(`${secrets}?fieldSelector=${encodeURIComponent('data.x=y')}`)).body.message,
      'field label not supported: data.x',
    );
    const events = '/api/v1/namespaces/default/events';
    assert.equal((await ts.client.get(`${events}?fieldSelector=${encodeURIComponent('involvedObject.name=x,reason=y')}`)).status, 200);
    // A Namespace has no metadata.namespace field label.
    const nsByNs = await ts.client.get(`/api/v1/namespaces?fieldSelector=${encodeURIComponent('metadata.namespace=x')}`);
    assert.equal(nsByNs.body.message, 'field label not supported: metadata.namespace');
    const watch = await ts.client.get(`${CM}?watch=true&timeoutSeconds=2&fieldSelector=${encodeURIComponent('data.k=v')}`);
    assert.equal(watch.status, 400);
    assert.equal((await ts.client.post(CM, cm('keep'))).status, 201);
    const dc = await ts.client.request('DELETE', `${CM}?fieldSelector=${encodeURIComponent('data.k=v')}`);
    assert.equal(dc.status, 400);
    assert.equal((await ts.client.get(`${CM}/keep`)).status, 200, 'a refused deletecollection deleted nothing');
  });

  it('a resourceVersion is accepted exactly when Go would parse it as a uint64, and anything else is a 400, never a crash', () => {
    const rvs = fc.oneof(fc.string(), fc.stringMatching(/^[0-9]{1,25}$/), fc.bigInt({ min: 0n, max: 2n ** 70n }).map(String));
    fc.assert(
      fc.property(rvs, (rv) => {
        const q = new URLSearchParams({ resourceVersion: rv });
        const parses = rv !== '' && /^[0-9]+$/.test(rv) && BigInt(rv) < 2n ** 64n;
        try {
          const r = requestedRevision(q, false);
          return parses ? r === Number(rv) : rv === '' && r === undefined;
        } catch (e) {
          return !parses && e instanceof ApiError && e.code === 400 && e.message.includes(goQuote(rv));
        }
      }),
    );
  });
});
