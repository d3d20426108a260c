import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_WATCH_CONFIG, detectionBoundMs, watchConfigFromEnv, watchTimeoutSeconds } from './watch-config.js';

describe('watch configuration', () => {
  it('defaults to 200 s server timeout, 90 s idle deadline, 5 s + 3 s pings and a 600 s relist', () => {
    const c = watchConfigFromEnv({});
    assert.equal(c.timeoutSeconds, 200);
    assert.equal(c.idleTimeoutMs, 90_000);
    assert.equal(c.pingIntervalMs, 5_000);
    assert.equal(c.pingTimeoutMs, 3_000);
    assert.equal(c.relistIntervalMs, 600_000);
    assert.equal(detectionBoundMs(c), 8_000, 'a dropped connection is noticed within 8 s with the defaults');
    // ADR 0038: noticed, then the first reconnect waits at most the initial backoff: repaired within 10 s.
    assert.ok(detectionBoundMs(c) + c.backoffInitialMs <= 9_000, 'a silent drop is repaired within 9 s + one reconnect');
  });

  it('clamps KARS_WATCH_TIMEOUT_SECS to 30..600 and reads garbage as 200', () => {
    assert.equal(watchConfigFromEnv({ KARS_WATCH_TIMEOUT_SECS: '5' }).timeoutSeconds, 30);
    assert.equal(watchConfigFromEnv({ KARS_WATCH_TIMEOUT_SECS: '9999' }).timeoutSeconds, 600);
    assert.equal(watchConfigFromEnv({ KARS_WATCH_TIMEOUT_SECS: 'soon' }).timeoutSeconds, 200);
    assert.equal(watchConfigFromEnv({ KARS_WATCH_TIMEOUT_SECS: '' }).timeoutSeconds, 200);
    assert.equal(watchConfigFromEnv({ KARS_WATCH_TIMEOUT_SECS: '240' }).timeoutSeconds, 240);
  });

  it('reads the idle deadline, ping and relist knobs, with 0 disabling pings and relists', () => {
    const c = watchConfigFromEnv({
      KARS_WATCH_IDLE_TIMEOUT_SECS: '1',
      KARS_HTTP2_PING_INTERVAL_SECS: '0',
      KARS_HTTP2_PING_TIMEOUT_SECS: '2',
      KARS_RELIST_INTERVAL_SECS: '0',
    });
    assert.equal(c.idleTimeoutMs, 1000);
    assert.equal(c.pingIntervalMs, 0);
    assert.equal(c.pingTimeoutMs, 2000);
    assert.equal(c.relistIntervalMs, 0);
    assert.equal(detectionBoundMs(c), 3000, 'without pings the idle deadline plus one probe bounds detection');
  });

  it('never modifies the defaults or the caller object', () => {
    const base = { pageSize: 7 };
    const c = watchConfigFromEnv({ KARS_WATCH_TIMEOUT_SECS: '31' }, base);
    assert.equal(c.pageSize, 7);
    assert.deepEqual(base, { pageSize: 7 });
    assert.equal(DEFAULT_WATCH_CONFIG.timeoutSeconds, 200);
  });

  it('adds jitter to each watch timeout without passing 600', () => {
    const c = watchConfigFromEnv({});
    assert.equal(
      watchTimeoutSeconds(c, () => 0),
      200,
    );
    assert.equal(
      watchTimeoutSeconds(c, () => 0.999),
      210,
    );
    assert.equal(
      watchTimeoutSeconds({ ...c, timeoutSeconds: 600 }, () => 0.999),
      600,
    );
  });
});
