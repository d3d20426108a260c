/**
 * The three undici values the router uses (`Agent`, `Client`, `buildConnector`), each loaded from
 * its own module rather than from undici's package entry, with the dispatcher API methods
 * (`request`, `stream`, …) the entry adds to every dispatcher. The entry loads all of undici (fetch,
 * WebSocket, EventSource, the HTTP cache, the mocks, the proxy agents): in a fresh process about
 * 5 MB of heap and 20 MB of RSS, against 2 MB and 12 MB for these three (ADR 0037).
 *
 * Caveats: these are undici's internal paths (undici 7 has no `exports` map, so they resolve).
 * `undici-parts.test.ts` checks, in a process that has not loaded the entry, that the dispatchers
 * have the entry's API methods, and then that each value is the very one the entry exports, so an
 * undici that moves or replaces one fails that test (and the router's start, with MODULE_NOT_FOUND) instead
 * of running something else. Types still come from the package entry (type imports load nothing).
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);

// What undici's package entry does first (index.js: `Object.assign(Dispatcher.prototype, api)`):
// every dispatcher gets `request`, `stream`, `pipeline`, `connect` and `upgrade`. Idempotent, so a
// process that also loads the entry ends up the same.
Object.assign(
  (require('undici/lib/dispatcher/dispatcher.js') as { prototype: object }).prototype,
  require('undici/lib/api/index.js') as object,
);

/** undici's `Agent` (lib/dispatcher/agent.js). */
export const Agent = require('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
export type Agent = Undici.Agent;
/** undici's `Client` (lib/dispatcher/client.js). */
export const Client = require('undici/lib/dispatcher/client.js') as typeof Undici.Client;
export type Client = Undici.Client;
/** undici's `buildConnector` (lib/core/connect.js). */
export const buildConnector = require('undici/lib/core/connect.js') as typeof Undici.buildConnector;

/** The module paths above, for the test that compares them with the package entry. */
export const UNDICI_PARTS = {
  Dispatcher: 'undici/lib/dispatcher/dispatcher.js',
  api: 'undici/lib/api/index.js',
  Agent: 'undici/lib/dispatcher/agent.js',
  Client: 'undici/lib/dispatcher/client.js',
  buildConnector: 'undici/lib/core/connect.js',
} as const;
