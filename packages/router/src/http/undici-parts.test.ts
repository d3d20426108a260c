/**
 * The router loads undici's Agent, Client and buildConnector from their own modules (ADR 0037).
 * They must behave as the package entry's: the dispatcher API methods the entry adds to every
 * dispatcher are there without the entry, and each value is the entry's very own.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Agent, Client, UNDICI_PARTS, buildConnector } from './undici-parts.js';

const require = createRequire(import.meta.url);

describe('undici parts', () => {
  it('give every dispatcher the API methods of the package entry, without loading the entry (hole: d.request is not a function)', () => {
    assert.equal(
      Object.keys(require.cache).some((f) => /[\\/]undici[\\/]index\.js$/.test(f)),
      false,
      "undici's package entry is not loaded in this process",
    );
    for (const m of ['request', 'stream', 'pipeline', 'connect', 'upgrade'] as const) {
      assert.equal(typeof Agent.prototype[m], 'function', `Agent.prototype.${m}`);
      assert.equal(typeof Client.prototype[m], 'function', `Client.prototype.${m}`);
    }
  });

  it('are the very values undici’s package entry exports', async () => {
    const undici = await import('undici');
    assert.equal(Agent, undici.Agent);
    assert.equal(Client, undici.Client);
    assert.equal(buildConnector, undici.buildConnector);
    assert.equal(Agent.prototype.request, undici.Dispatcher.prototype.request);
    for (const path of Object.values(UNDICI_PARTS)) assert.ok(require.resolve(path).includes('undici'), path);
  });
});
