import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js';

describe('label selectors', () => {
  it('parses equality, inequality, set and existence terms', () => {
    const sel = parseLabelSelector('app=web, tier!=db,env in (prod, staging),!legacy,owner');
    assert.deepEqual(
      sel.map((r) => r.op),
      ['=', '!=', 'in', '!', 'exists'],
    );
    assert.deepEqual(sel[2]?.values, ['prod', 'staging']);
  });

  it('matches only when every requirement holds', () => {
    const sel = parseLabelSelector('app=web,env in (prod),!legacy');
    assert.equal(matchesLabels(sel, { app: 'web', env: 'prod' }), true);
    assert.equal(matchesLabels(sel, { app: 'web', env: 'dev' }), false);
    assert.equal(matchesLabels(sel, { app: 'web', env: 'prod', legacy: 'yes' }), false);
    assert.equal(matchesLabels(parseLabelSelector('tier!=db'), {}), true);
    assert.equal(matchesLabels(parseLabelSelector('x notin (a)'), { x: 'b' }), true);
  });

  it('rejects a malformed term with a 400 error naming it', () => {
    assert.throws(
      () => parseLabelSelector('app=web,in valid=('),
      (e: any) => e.code === 400 && /in valid/.test(e.message),
    );
  });
});

describe('field selectors', () => {
  it('parses and matches metadata.name and metadata.namespace', () => {
    const reqs = parseFieldSelector('metadata.name=a,metadata.namespace!=kube-system');
    const get = (o: Record<string, string>) => (f: string) => o[f];
    assert.equal(matchesFields(reqs, get({ 'metadata.name': 'a', 'metadata.namespace': 'default' })), true);
    assert.equal(matchesFields(reqs, get({ 'metadata.name': 'a', 'metadata.namespace': 'kube-system' })), false);
    assert.throws(() => parseFieldSelector('justtext'));
  });
});
