import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  budgetExceeded,
  decisionHeaders,
  perRequestTokensExceeded,
  proxyError,
  refusalHeaders,
  refusalJson,
  sanitizeHeaderValue,
  streamRefusalFrames,
} from './errors.js';

describe('inference errors', () => {
  it('shapes bodies as the contract writes them, with no code on the 502', () => {
    assert.equal(refusalJson(proxyError()), '{"error":{"message":"Failed to reach inference backend","type":"proxy_error"}}');
    assert.equal(
      refusalJson(perRequestTokensExceeded('Requested max_tokens=4097 exceeds InferencePolicy tokenBudget.perRequestTokens=4096')),
      '{"error":{"message":"Requested max_tokens=4097 exceeds InferencePolicy tokenBudget.perRequestTokens=4096","type":"token_budget_exceeded","code":"per_request_tokens_exceeded"}}',
    );
  });

  it('puts the decision triplet on policy blocks only', () => {
    const h = refusalHeaders(budgetExceeded('over'), 10);
    assert.equal(h['x-kars-decision'], 'blocked');
    assert.equal(h['x-kars-decision-by-kind'], 'InferencePolicy');
    assert.equal(h['x-kars-decision-reason'], 'over');
    assert.equal(refusalHeaders(proxyError(), 10)['x-kars-decision'], undefined);
  });

  it('sanitises header values so upstream text cannot break HTTP framing', () => {
    assert.equal(sanitizeHeaderValue('a\r\nSet-Cookie: x'), 'a  Set-Cookie: x');
    assert.equal(sanitizeHeaderValue('naïve ✓'), 'na?ve ?');
    assert.equal(sanitizeHeaderValue('x'.repeat(600)).length, 512);
    assert.equal(decisionHeaders('UpstreamContentFilter', 'bad\nthing')['x-kars-decision-reason'], 'bad thing');
  });

  it('frames a stream refusal as one error event then [DONE]', () => {
    assert.equal(
      streamRefusalFrames(proxyError()),
      'data: {"error":{"message":"Failed to reach inference backend","type":"proxy_error"}}\n\ndata: [DONE]\n\n',
    );
  });
});
