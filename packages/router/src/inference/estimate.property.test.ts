/**
 * The prompt reservation against real token counts (issue 25 item 7, ADR 0027): for any text, in
 * any script, the estimate of a chat request carrying it is never below the text's token count in
 * OpenAI's o200k_base (GPT-4o and later) or cl100k_base (GPT-4, GPT-3.5) encoding, counted by
 * gpt-tokenizer (a dev dependency; the router itself does not load it).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { decideRequest } from './pipeline.js';
import { CHAT } from './apis.js';
import type { ApiRoute } from './routes.js';

const ROUTE: ApiRoute = { kind: 'api', api: CHAT, prefix: '/v1', deployment: undefined, query: '' };
const CTX = { defaultDailyTokens: null, guardrailConfigured: false };

/** The prompt part of the reservation the router makes for one user message `text` (no completion cap: max_tokens 1). */
function promptReservation(text: string, extra: Record<string, unknown> = {}): number {
  const d = decideRequest(
    Buffer.from(JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: text }], max_tokens: 1, ...extra })),
    ROUTE,
    undefined,
    CTX,
  );
  assert.equal(d.kind, 'forward');
  return d.kind === 'forward' ? (d.reserve?.tokens ?? 0) - 1 : 0;
}

const real = (text: string): number => Math.max(o200k(text), cl100k(text));

describe('prompt reservation vs real token counts (o200k_base, cl100k_base)', { timeout: 120_000 }, () => {
  it('is never below the real count, for any Unicode text (hole: bytes / 4 undercounted CJK and emoji 1.3–3×)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => {
        const est = promptReservation(text);
        const n = real(text);
        assert.ok(est >= n, `estimate ${est} < ${n} real tokens for ${JSON.stringify(text)}`);
      }),
      { numRuns: 300 },
    );
  });

  it('is never below the real count for text built from the scripts that tokenize worst (CJK, emoji, combining marks, digits, punctuation)', () => {
    const pieces = [
      '漢字',
      '한국어',
      'カタカナ',
      '😀',
      '👍🏽',
      '👨‍👩‍👧',
      'é',
      '\u0301',
      '٣',
      '1',
      '!',
      ' ',
      '\n',
      'a',
      '{',
      '"',
      '\\',
      '\u200d',
      '\ud800',
    ];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 300 }), (parts) => {
        const text = parts.join('');
        assert.ok(promptReservation(text) >= real(text), JSON.stringify(text));
      }),
      { numRuns: 300 },
    );
  });

  it('a 100,000-character CJK prompt reserves at least its real tokens', () => {
    const text = '日本語の文章と中文句子和한국어 문장'.repeat(6000);
    assert.ok(promptReservation(text) >= real(text));
  });
});
