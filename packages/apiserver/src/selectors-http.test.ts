/**
 * Regression tests for issue 25 item 6 (selectors) against a real `kars apiserver`: list and watch
 * with a label or field selector kube-apiserver refuses get its 400 Status and message.
 *
 * Before the fix a label value of 12,000 characters ending in `!` got 200 and an empty list.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './testing/harness.js';

const CM = '/api/v1/namespaces/default/configmaps';
const LONG = 'a'.repeat(11999);
const LABEL_VALUE_HINT =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

describe('API server: selectors validated as kube-apiserver does (issue 25 item 6)', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
    const r = await ts.client.post(CM, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'one', labels: { app: 'web' } } });
    assert.equal(r.status, 201);
  });
  after(() => ts.close());

  for (const [label, query, message] of [
    [
      'a 12,000-character label value ending in ! (hole: 200 and an empty list)',
      `labelSelector=${encodeURIComponent(`app=${LONG}!`)}`,
      `unable to parse requirement: values[0][app]: Invalid value: "${LONG}": must be no more than 63 characters`,
    ],
    [
      'a label value that is not a label value (hole: 200)',
      `labelSelector=${encodeURIComponent('app=-web')}`,
      `unable to parse requirement: values[0][app]: Invalid value: "-web": ${LABEL_VALUE_HINT}`,
    ],
    [
      'a set value that is not a label value (hole: 200)',
      `labelSelector=${encodeURIComponent('app in (web,x!)')}`,
      "unable to parse requirement: found '!', expected: ',' or ')'",
    ],
    [
      'a field selector value with a bare = (hole: 200)',
      `fieldSelector=${encodeURIComponent('metadata.name==a=b')}`,
      'invalid field selector: unescaped character in value: 61',
    ],
    [
      'a field selector escape kube does not know (hole: 200)',
      `fieldSelector=${encodeURIComponent('metadata.name=a\\x')}`,
      'invalid field selector: invalid escape sequence: \\x',
    ],
  ] as const) {
    for (const watch of [false, true]) {
      it(`${watch ? 'watch' : 'list'}: ${label} → 400 BadRequest with kube's message`, async () => {
        const r = await ts.client.get(`${CM}?${watch ? 'watch=true&' : ''}${query}`);
        assert.equal(r.status, 400, r.text.slice(0, 300));
        assert.deepEqual(r.body, {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message,
          reason: 'BadRequest',
          code: 400,
        });
      });
    }
  }

  it('valid selectors still select', async () => {
    const hit = await ts.client.get(`${CM}?labelSelector=${encodeURIComponent('app in (web,api),!legacy')}`);
    assert.equal(hit.status, 200);
    assert.deepEqual(
      (hit.body as { items: Array<{ metadata: { name: string } }> }).items.map((i) => i.metadata.name),
      ['one'],
    );
    const miss = await ts.client.get(`${CM}?fieldSelector=${encodeURIComponent('metadata.name=two')}`);
    assert.equal((miss.body as { items: unknown[] }).items.length, 0);
  });
});
