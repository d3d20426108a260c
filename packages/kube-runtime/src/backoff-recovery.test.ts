/**
 * ADR 0007's backoff reset rule, as a pure function. The watcher loop's use of it (several faults
 * after recoveries, an outage then an immediate fault, accept-and-drop) runs on virtual time in
 * watcher-driver.test.ts; the real-network faults themselves (resets, freezes, restarts) in
 * reflector.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MIN_HEALTHY_WATCH_MS, shouldResetBackoff } from './watcher.js';

describe('backoff reset rule', () => {
  const cfg = { backoffResetMs: 60_000 };
  it('starts over once a watch opened and stayed up for a second', () => {
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS, cfg), true);
    assert.equal(shouldResetBackoff(true, 5_000, cfg), true);
  });
  it('starts over when the server accepts a watch, even one a new fault cuts at once', () => {
    assert.equal(shouldResetBackoff(true, 0, cfg, 0), true, 'accepted after an outage, cut at once');
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS - 1, cfg), true);
  });
  it('keeps growing while the server refuses, or accepts and drops watch after watch', () => {
    assert.equal(shouldResetBackoff(false, 5_000, cfg), false, 'never opened: the server is not reachable');
    assert.equal(shouldResetBackoff(false, 5_000, cfg, 0), false);
    assert.equal(shouldResetBackoff(true, MIN_HEALTHY_WATCH_MS - 1, cfg, 1), false, 'the second accepted-and-dropped in a row');
    assert.equal(shouldResetBackoff(true, 10, cfg, 5), false);
  });
  it('starts over after the long healthy period whatever happened', () => {
    assert.equal(shouldResetBackoff(false, 60_000, cfg), true);
  });
});
