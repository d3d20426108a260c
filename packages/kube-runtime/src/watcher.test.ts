import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '@kars/kube-core';
import { ConnectionLostError } from '@kars/kube-client';
import { Backoff } from './backoff.js';
import { classifyFailure, nextState } from './watcher.js';

const watching = { phase: 'watching' as const, resourceVersion: '42' };

describe('watcher state machine', () => {
  it('resumes from the last resourceVersion at once after a clean server end', () => {
    assert.deepEqual(nextState(watching, { kind: 'ended' }), { state: watching, restart: 'server_timeout', backoff: false });
  });

  it('goes back to listing after 410 Expired', () => {
    assert.deepEqual(nextState(watching, { kind: 'expired' }), {
      state: { phase: 'empty', reason: 'expired' },
      restart: 'expired',
      backoff: false,
    });
  });

  it('resumes from the last resourceVersion after a backoff on idle, ping and other failures', () => {
    for (const reason of ['idle', 'ping', 'error'] as const) {
      assert.deepEqual(nextState(watching, { kind: 'failed', reason, error: new Error('x') }), {
        state: watching,
        restart: reason,
        backoff: true,
      });
    }
  });

  it('lists again when the periodic relist is due, without counting a restart', () => {
    assert.deepEqual(nextState(watching, { kind: 'relist-due' }), {
      state: { phase: 'empty', reason: 'periodic' },
      restart: undefined,
      backoff: false,
    });
  });

  it('classifies 410, idle, ping and other failures', () => {
    assert.deepEqual(classifyFailure(new ApiError(410, 'Expired', 'too old')), { kind: 'expired' });
    assert.equal((classifyFailure(new ConnectionLostError('idle', 'quiet')) as { reason: string }).reason, 'idle');
    assert.equal((classifyFailure(new ConnectionLostError('ping', 'dead')) as { reason: string }).reason, 'ping');
    assert.equal((classifyFailure(new ConnectionLostError('reset', 'rst')) as { reason: string }).reason, 'error');
    assert.equal((classifyFailure(new Error('boom')) as { reason: string }).reason, 'error');
  });
});

describe('reconnect backoff', () => {
  it('starts between half and all of the initial delay, doubles, caps, and resets', () => {
    const lo = new Backoff(1000, 30_000, () => 0);
    const hi = new Backoff(1000, 30_000, () => 1);
    assert.equal(lo.next(), 500);
    assert.equal(hi.next(), 1000);
    assert.equal(hi.next(), 2000);
    for (let i = 0; i < 10; i++) hi.next();
    assert.equal(hi.next(), 30_000, 'never above the cap');
    hi.reset();
    assert.equal(hi.next(), 1000);
  });
});
