import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from './errors.js';
import { errorCode, hasErrorCode, httpStatusOf, KARS_ERROR_CODE } from './codes.js';
import { silentLogger } from './logger.js';

describe('error codes', () => {
  it('accepts KARS_ upper snake case only', () => {
    for (const ok of ['KARS_CONNECTION_LOST', 'KARS_LEADER_ELECTION_INVALID_CONFIG', 'KARS_HTTP2_PING']) assert.match(ok, KARS_ERROR_CODE);
    for (const bad of ['INVALID_CONFIG', 'invalid_listen', 'KARS_', 'KARS__X', 'KARS_x', 'CommitFailed', 'KARS_A_', ' KARS_A'])
      assert.doesNotMatch(bad, KARS_ERROR_CODE);
  });

  it('reads string codes, and HTTP statuses from ApiError, without confusing the two', () => {
    const lost = Object.assign(new Error('x'), { code: 'KARS_CONNECTION_LOST' });
    assert.equal(errorCode(lost), 'KARS_CONNECTION_LOST');
    assert.equal(hasErrorCode(lost, 'KARS_CONNECTION_LOST'), true);
    assert.equal(hasErrorCode(lost, 'KARS_OTHER'), false);
    const api = new ApiError(409, 'Conflict', 'stale');
    assert.equal(errorCode(api), undefined);
    assert.equal(httpStatusOf(api), 409);
    assert.equal(httpStatusOf(lost), undefined);
    for (const v of [undefined, null, 'KARS_X', 42, {}]) {
      assert.equal(errorCode(v), undefined);
      assert.equal(httpStatusOf(v), undefined);
    }
  });
});

describe('silentLogger', () => {
  it('accepts every call, returns itself as child, and reports every level disabled', () => {
    silentLogger.error({ err: new Error('x') }, 'nothing happens');
    assert.equal(silentLogger.child({ a: 1 }), silentLogger);
    assert.equal(silentLogger.isLevelEnabled?.('error'), false);
  });
});
