import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../clock.js';
import { until } from './index.js';

describe('until (kube-core/testing)', () => {
  it('returns the first truthy value, polling until then', async () => {
    let calls = 0;
    assert.equal(await until('third call', () => (++calls >= 3 ? `call ${calls}` : undefined), { everyMs: 1 }), 'call 3');
    assert.equal(calls, 3);
  });

  it('treats an exception as "not yet", and names what and the last error when it gives up', async () => {
    let calls = 0;
    const started = Date.now();
    await assert.rejects(
      until(
        'the widget',
        () => {
          calls++;
          throw new Error('boom');
        },
        { timeoutMs: 60, everyMs: 5 },
      ),
      /^Error: the widget: not within 60 ms \(last error: Error: boom\)$/,
    );
    assert.ok(calls >= 2, `polled ${calls} times`);
    assert.ok(Date.now() - started >= 60);
  });

  it('accepts a bare timeout, as the helpers it replaced did', async () => {
    await assert.rejects(
      until('never', () => false, 30),
      /never: not within 30 ms/,
    );
  });

  it('waits on the clock it is given', async () => {
    const clock = new FakeClock();
    let ready = false;
    const p = until('flag', () => ready, { clock, everyMs: 100, timeoutMs: 1000 });
    await clock.advanceAsync(300);
    ready = true;
    await clock.advanceAsync(100);
    assert.equal(await p, true);
    assert.equal(clock.now(), 400);
  });
});
