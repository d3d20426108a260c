/**
 * The router's request counter over real HTTP: decisions are counted in plain numbers on the hot
 * path and handed to prom-client at scrape time (server.ts), so a scrape must still show every one.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startOpenAIStub } from './stubs/openai.js';
import { budgetPolicy, startDirRouter } from './testing/policy-dir.js';

/** `kars_router_requests_total{surface,decision}` from a scrape; 0 when the series is absent. */
function requests(metrics: string, surface: string, decision: string): number {
  const m = metrics.match(new RegExp(`^kars_router_requests_total\\{surface="${surface}",decision="${decision}"\\} (\\d+)$`, 'm'));
  return m ? Number(m[1]) : 0;
}

describe('kars_router_requests_total', () => {
  it('counts every inference decision, across scrapes, without double counting', async () => {
    const stub = await startOpenAIStub();
    const r = await startDirRouter({ inference: budgetPolicy({ perRequestTokens: 100 }) }, { upstream: stub.url });
    try {
      const send = (maxTokens: number): Promise<number> =>
        fetch(`${r.router.url}/v1/chat/completions`, {
          method: 'POST',
          body: JSON.stringify({ model: 'm', max_tokens: maxTokens, messages: [] }),
        }).then(async (x) => (await x.arrayBuffer(), x.status));
      const scrape = (): Promise<string> => fetch(`${r.router.url}/metrics`).then((x) => x.text());
      assert.deepEqual(await Promise.all([send(10), send(10), send(500)]), [200, 200, 429]);
      const first = await scrape();
      assert.equal(requests(first, 'inference', 'allow'), 2);
      assert.equal(requests(first, 'inference', 'deny'), 1);
      assert.equal(await send(10), 200);
      const second = await scrape();
      assert.equal(requests(second, 'inference', 'allow'), 3, 'counted since the last scrape, once');
      assert.equal(requests(second, 'inference', 'deny'), 1);
      assert.equal(requests(await scrape(), 'inference', 'allow'), 3, 'a scrape alone adds nothing');
    } finally {
      await r.stop();
      await stub.close();
    }
  });
});
