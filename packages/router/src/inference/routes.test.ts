/**
 * The route table (`routes.ts`): each route matches its API, and no other spelling of a path
 * matches anything (a hostile agent cannot reach an upstream path the table does not govern).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { canonicalDeployment, matchRoute, upstreamPath, wireOf, type ApiRoute } from './routes.js';

const ROUTES: Record<string, string> = {
  '/v1/chat/completions': 'chat',
  '/openai/v1/chat/completions': 'chat',
  '/openai/deployments/gpt-4o/chat/completions': 'chat',
  '/v1/responses': 'responses',
  '/openai/v1/responses': 'responses',
  '/openai/responses': 'responses',
  '/openai/deployments/gpt-4o/responses': 'responses',
  '/v1/embeddings': 'embeddings',
  '/openai/v1/embeddings': 'embeddings',
  '/openai/deployments/emb/embeddings': 'embeddings',
  '/v1/messages': 'messages',
  '/v1/messages/count_tokens': 'count_tokens',
};

describe('route table', () => {
  it('matches each route to its API, keeping the query', () => {
    for (const [path, api] of Object.entries(ROUTES)) {
      const m = matchRoute('POST', `${path}?api-version=2024-10-21`);
      assert.equal(m.kind, 'api', path);
      assert.equal((m as ApiRoute).api.name, api, path);
      assert.equal((m as ApiRoute).query, '?api-version=2024-10-21');
    }
  });

  it('sends each route to the same path under the upstream base, the deployment replaced in the Azure form', () => {
    for (const path of Object.keys(ROUTES)) {
      const m = matchRoute('POST', path) as ApiRoute;
      assert.equal(upstreamPath(m, '/base', undefined), `/base${path}`);
    }
    const az = matchRoute('POST', '/openai/deployments/a/chat/completions?x=1') as ApiRoute;
    assert.equal(upstreamPath(az, '', 'b c'), '/openai/deployments/b%20c/chat/completions?x=1');
  });

  it('passes GET /v1/models through, and refuses stored responses and batches with their reason', () => {
    assert.equal(matchRoute('GET', '/v1/models').kind, 'models');
    assert.equal(matchRoute('GET', '/v1/models/gpt-4o').kind, 'models');
    for (const p of [
      '/v1/responses/resp_1',
      '/v1/responses/resp_1/cancel',
      '/v1/responses/resp_1/input_items',
      '/v1/messages/batches',
      '/v1/batches',
    ]) {
      const m = matchRoute('POST', p);
      assert.equal(m.kind === 'refused' && m.code, 'unsupported_route', p);
    }
  });

  it('answers in the envelope of the API asked', () => {
    assert.equal(wireOf('/v1/messages', undefined), 'anthropic');
    assert.equal(wireOf('/v1/nothing', '2023-06-01'), 'anthropic');
    assert.equal(wireOf('/v1/nothing', undefined), 'openai');
    const m = matchRoute('POST', '/v1/messages/batches/x');
    assert.equal(m.kind === 'refused' && m.wire, 'anthropic');
  });

  it('property: any other spelling of a route (case, slashes, percent-encoding, dot segments) matches nothing', () => {
    const mutate = fc.oneof(
      fc.constant((p: string, _i: number) => p.toUpperCase()),
      fc.constant((p: string, i: number) => {
        const at = 1 + (i % (p.length - 1));
        return p.slice(0, at) + p.charAt(at).toUpperCase() + p.slice(at + 1);
      }),
      fc.constant((p: string) => `${p}/`),
      fc.constant((p: string) => `/${p}`),
      fc.constant((p: string, i: number) => {
        const slashes = [...p.matchAll(/\//g)].map((m) => m.index);
        const at = slashes[i % slashes.length] ?? 0;
        return `${p.slice(0, at)}/${p.slice(at)}`;
      }),
      fc.constant((p: string, i: number) => {
        const at = 1 + (i % (p.length - 1));
        const c = p.charAt(at);
        return p.slice(0, at) + `%${c.charCodeAt(0).toString(16).padStart(2, '0')}` + p.slice(at + 1);
      }),
      fc.constant((p: string, i: number) => {
        const slashes = [...p.matchAll(/\//g)].map((m) => m.index);
        const at = slashes[i % slashes.length] ?? 0;
        return `${p.slice(0, at)}/.${p.slice(at)}`;
      }),
      fc.constant((p: string) => `${p};x`),
    );
    fc.assert(
      fc.property(fc.constantFrom(...Object.keys(ROUTES)), mutate, fc.nat(), (path, f, i) => {
        const spelled = f(path, i);
        fc.pre(spelled !== path);
        const m = matchRoute('POST', spelled);
        // The Azure deployment segment may legitimately change case or be percent-encoded.
        if (m.kind === 'api') {
          assert.ok(path.startsWith('/openai/deployments/'), `${spelled} matched ${m.api.name}`);
          assert.equal(upstreamPath(m, '', undefined).replace(/\/openai\/deployments\/[^/]+/, ''), `${m.api.suffix}`);
        } else assert.equal(m.kind, 'refused', spelled);
      }),
      { numRuns: 2000 },
    );
  });

  it('property: a deployment segment is re-encoded canonically, or refused when it decodes to a separator, a dot segment, a % or a control', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }), (name) => {
        const raw = encodeURIComponent(name);
        const c = canonicalDeployment(raw);
        // eslint-disable-next-line no-control-regex
        const bad = name === '.' || name === '..' || /[/\\?#%\u0000-\u001f\u007f]/.test(name);
        if (bad) assert.equal(c, undefined, JSON.stringify(name));
        else {
          assert.equal(c, raw);
          assert.equal(decodeURIComponent(c ?? ''), name);
        }
      }),
      { numRuns: 1000 },
    );
    for (const raw of ['a%2Fb', '..', '%2E%2E', 'a%5Cb', '%ZZ', 'a%00'])
      assert.equal(matchRoute('POST', `/openai/deployments/${raw}/chat/completions`).kind, 'refused', raw);
  });
});
