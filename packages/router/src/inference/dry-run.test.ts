/**
 * The dry-run moderation bound (ADR 0050): a dry-run policy's input stage is judged after the
 * request, outside the admission gate, so a hostile agent's stream of cheap requests must not hold
 * any number of moderation calls open. At most MAX_DRY_RUN_MODERATIONS run; the rest are recorded
 * as not judged, never as a verdict, and every slot is given back.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UpstreamClient } from '../http/upstream.js';
import { inferenceRules } from '../testing/rules.js';
import { DryRunModerations, finishDryRun, MAX_DRY_RUN_MODERATIONS, NOT_JUDGED, type DryRunOutcome, type PendingDryRun } from './dry-run.js';

describe('dry-run moderation bound', () => {
  let server: Server;
  let url: URL;
  const held: ServerResponse[] = [];
  const client = new UpstreamClient();
  before(async () => {
    // A moderation backend that answers only when told to.
    server = createServer((_req: IncomingMessage, res: ServerResponse) => void held.push(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await client.close();
  });

  it('runs at most the bound at once, records the rest as not judged, and gives every slot back', async () => {
    const slots = new DryRunModerations();
    const outcomes: DryRunOutcome[] = [];
    const policy = { rules: inferenceRules({ enforcement: 'DryRun' }), refs: [] };
    const pending = (): PendingDryRun => ({ policy, decision: 'allow', reason: 'allowed', reservation: undefined, moderate: ['hello'] });
    const n = MAX_DRY_RUN_MODERATIONS + 5;
    for (let i = 0; i < n; i++)
      finishDryRun([pending()], 0, { backend: { url, timeoutMs: 30_000 }, client, slots }, (o) => outcomes.push(o));
    assert.equal(slots.inFlight, MAX_DRY_RUN_MODERATIONS);
    assert.deepEqual(
      outcomes.map((o) => [o.decision, o.reason]),
      Array.from({ length: 5 }, () => ['allow', NOT_JUDGED]),
    );
    // The backend answers: clean for every call that was made.
    while (held.length < MAX_DRY_RUN_MODERATIONS) await new Promise((r) => setTimeout(r, 10));
    for (const res of held.splice(0))
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: [{ flagged: false, categories: {} }] }));
    while (outcomes.length < n) await new Promise((r) => setTimeout(r, 10));
    assert.equal(outcomes.filter((o) => o.reason === 'allowed').length, MAX_DRY_RUN_MODERATIONS);
    assert.equal(slots.inFlight, 0);
  });
});
