import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { batchesAllowed, DEFAULT_PROTOCOL_VERSION, KNOWN_PROTOCOL_VERSIONS, requestVersion, SessionVersions } from './protocol.js';
import { envelopeProblem } from './envelope.js';
import { fold } from '../json/fold.js';

describe('requestVersion', () => {
  it('takes the header, else the session, else 2025-03-26', () => {
    const s = new SessionVersions();
    s.set('a', '2025-11-25');
    assert.deepEqual(requestVersion({ 'mcp-protocol-version': '2025-06-18' }, s), { ok: true, version: '2025-06-18', session: undefined });
    assert.deepEqual(requestVersion({ 'mcp-session-id': 'a' }, s), { ok: true, version: '2025-11-25', session: 'a' });
    assert.deepEqual(requestVersion({ 'mcp-session-id': 'b' }, s), { ok: true, version: DEFAULT_PROTOCOL_VERSION, session: 'b' });
    assert.deepEqual(requestVersion({}, s), { ok: true, version: '2025-03-26', session: undefined });
  });

  it('refuses an unknown, malformed or listed version, and one that is not the session negotiated', () => {
    const s = new SessionVersions();
    s.set('a', '2025-11-25');
    for (const v of ['2099-01-01', 'latest', '', '2025-11-25, 2025-06-18', '2025-11-25\u200b', '2024-10-07']) {
      const r = requestVersion({ 'mcp-protocol-version': v }, s);
      assert.equal(r.ok, false, JSON.stringify(v));
      if (!r.ok) assert.equal(r.data['code'], 'protocol_version_unsupported');
    }
    const r = requestVersion({ 'mcp-protocol-version': '2025-03-26', 'mcp-session-id': 'a' }, s);
    assert.equal(r.ok, false);
    if (!r.ok) assert.equal(r.data['code'], 'protocol_version_mismatch');
  });

  it('allows batches only before 2025-06-18', () => {
    assert.deepEqual(
      KNOWN_PROTOCOL_VERSIONS.map((v) => [v, batchesAllowed(v)]),
      [
        ['2024-11-05', true],
        ['2025-03-26', true],
        ['2025-06-18', false],
        ['2025-11-25', false],
      ],
    );
  });

  it('forgets the oldest session first when full', () => {
    const s = new SessionVersions(2);
    s.set('a', '2025-06-18');
    s.set('b', '2025-06-18');
    s.set('a', '2025-11-25'); // refreshed: now the newest
    s.set('c', '2025-11-25');
    assert.equal(s.size, 2);
    assert.equal(s.get('b'), undefined);
    assert.equal(s.get('a'), '2025-11-25');
    s.delete('a');
    assert.equal(s.get('a'), undefined);
  });
});

describe('envelopeProblem', () => {
  it('accepts the messages the SDKs send', () => {
    for (const m of [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'x', arguments: { Name: 'free', NAME: 'as', name: 'data' }, _meta: {} },
      },
      { jsonrpc: '2.0', id: 1, result: { tools: [] } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list', params: { cursor: 'c', Cursor: 'other methods are not read by name' } },
    ])
      assert.equal(envelopeProblem(m), undefined, JSON.stringify(m));
  });

  it('refuses keys and methods that fold to a member they are not', () => {
    for (const m of [
      { jsonrpc: '2.0', id: 1, Method: 'tools/call' },
      { jsonrpc: '2.0', id: 1, method: 'ping', PARAMS: {} },
      { jsonrpc: '2.0', ID: 1, id: 2, method: 'ping' },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'a', NAME: 'b' } },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'a', 'n\u200bame': 'b' } },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'a', ARGUMENTS: {} } },
      { jsonrpc: '2.0', id: 1, method: 'TOOLS/CALL', params: { name: 'a' } },
      { jsonrpc: '2.0', id: 1, method: '\ttools/call', params: { name: 'a' } },
      { jsonrpc: '2.0', id: 1, method: 'ｔools/call', params: { name: 'a' } },
    ])
      assert.match(envelopeProblem(m) ?? '', /another spelling/, JSON.stringify(m));
  });

  it('folds as a lenient decoder would: case, compatibility forms (long s, Kelvin sign), invisible characters', () => {
    assert.equal(fold('Paramſ'), 'params');
    assert.equal(fold('\u212Aey'), 'key');
    assert.equal(fold('to\u200bols/ca\u00adll'), 'tools/call');
  });
});
