import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_WATCH_CONFIG } from '../watch-config.js';
import { fastWatchConfig } from './index.js';

describe('fastWatchConfig (kube-runtime/testing)', () => {
  it('has one default: PING 500 ms, backoff 100 ms to 1 s, idle 3 s, no periodic relist', () => {
    assert.deepEqual(fastWatchConfig(), {
      ...DEFAULT_WATCH_CONFIG,
      idleTimeoutMs: 3000,
      pingIntervalMs: 500,
      pingTimeoutMs: 500,
      backoffInitialMs: 100,
      backoffMaxMs: 1000,
      relistIntervalMs: 0,
    });
  });

  it('takes the knobs tests vary as parameters, and any other field through over', () => {
    const c = fastWatchConfig({ pingMs: 1000, backoffMs: 200, backoffMaxMs: 2000, idleMs: 5000 }, { timeoutSeconds: 60 });
    assert.equal(c.pingIntervalMs, 1000);
    assert.equal(c.pingTimeoutMs, 1000);
    assert.equal(c.backoffInitialMs, 200);
    assert.equal(c.backoffMaxMs, 2000);
    assert.equal(c.idleTimeoutMs, 5000);
    assert.equal(c.timeoutSeconds, 60);
    const off = fastWatchConfig({ pingMs: 0 });
    assert.equal(off.pingIntervalMs, 0, 'PINGs off');
    assert.ok(off.pingTimeoutMs > 0, 'a PING deadline stays valid');
  });

  it('never changes the shared defaults', () => {
    fastWatchConfig().pingIntervalMs = 1;
    assert.equal(DEFAULT_WATCH_CONFIG.pingIntervalMs, 5_000);
  });
});
