/**
 * Usage per API (`usage.ts`), read as the answer passes: the same figure however the bytes are
 * split, the upstream's figure even where the agent can put a `usage` key of its own, and none
 * (so the reservation is charged) for a stream cut before its usage.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { usageReader, MAX_USAGE_BODY_BYTES } from './usage.js';
import type { UsageShape } from './apis.js';

function read(shape: UsageShape, stream: boolean, body: string, cuts: number[] = []): number | undefined {
  const r = usageReader(shape, stream);
  const b = Buffer.from(body);
  let at = 0;
  for (const c of [...cuts].sort((x, y) => x - y)) {
    const end = Math.min(Math.max(c, at), b.length);
    r.push(b.subarray(at, end));
    at = end;
  }
  r.push(b.subarray(at));
  return r.total();
}

const ev = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

const responsesStream = (usage: unknown, padding = 0): string =>
  ev('response.created', { type: 'response.created', sequence_number: 0, response: { id: 'r', status: 'in_progress', usage: null } }) +
  ev('response.output_text.delta', { type: 'response.output_text.delta', sequence_number: 1, delta: 'Hi "usage":{"total_tokens":1}' }) +
  ev('response.completed', {
    type: 'response.completed',
    sequence_number: 2,
    response: { id: 'r', status: 'completed', instructions: 'x'.repeat(padding), usage, metadata: { usage: '{"total_tokens":1}' } },
  });

const anthropicStream = (input: number, output: number, cut = false): string =>
  ev('message_start', {
    type: 'message_start',
    message: { id: 'm', usage: { input_tokens: input, output_tokens: 1, cache_read_input_tokens: 5 } },
  }) +
  ev('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'hello' } }) +
  (cut
    ? ''
    : ev('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: output } }) +
      ev('message_stop', { type: 'message_stop' }));

describe('usage per API', () => {
  it("Responses JSON: the top-level usage, not the agent's metadata key after it", () => {
    const body = JSON.stringify({
      id: 'r',
      output: [],
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
      metadata: { usage: 'x' },
    });
    assert.equal(read('responses', false, body), 15);
    assert.equal(read('responses', false, JSON.stringify({ usage: { input_tokens: 3, output_tokens: 4 } })), 7);
  });

  it("Responses stream: the terminal event's usage, whatever its size, and nothing from text that looks like usage", () => {
    assert.equal(read('responses', true, responsesStream({ total_tokens: 42 })), 42);
    assert.equal(read('responses', true, responsesStream({ total_tokens: 42 }, 200_000)), 42, 'a completed event larger than any tail');
    assert.equal(read('responses', true, responsesStream(null)), undefined);
    const cut = responsesStream({ total_tokens: 42 });
    assert.equal(read('responses', true, cut.slice(0, cut.indexOf('event: response.completed'))), undefined, 'cut before completion');
    for (const terminal of ['response.incomplete', 'response.failed'])
      assert.equal(read('responses', true, ev(terminal, { type: terminal, response: { usage: { total_tokens: 9 } } })), 9, terminal);
  });

  it('Anthropic: input (with cache) from message_start plus output from message_delta; none when cut before the delta', () => {
    assert.equal(read('anthropic', true, anthropicStream(100, 30)), 135);
    assert.equal(read('anthropic', true, anthropicStream(100, 30, true)), undefined);
    assert.equal(
      read(
        'anthropic',
        false,
        JSON.stringify({ content: [], usage: { input_tokens: 7, output_tokens: 3, cache_creation_input_tokens: 2 } }),
      ),
      12,
    );
  });

  it('chat: the last usage chunk of a stream, and the tail of a body', () => {
    const s = `data: ${JSON.stringify({ choices: [{ delta: { content: 'a' } }] })}\n\ndata: ${JSON.stringify({ choices: [], usage: { total_tokens: 11 } })}\n\ndata: [DONE]\n\n`;
    assert.equal(read('openai-total', true, s), 11);
    assert.equal(read('openai-total', false, JSON.stringify({ choices: [], usage: { total_tokens: 4 } })), 4);
  });

  it('property: the figure does not depend on how the bytes are split', () => {
    const cases: Array<[UsageShape, boolean, string, number | undefined]> = [
      ['responses', true, responsesStream({ total_tokens: 42 }, 3000), 42],
      ['anthropic', true, anthropicStream(100, 30), 135],
      ['anthropic', true, anthropicStream(100, 30, true), undefined],
      ['openai-total', true, `data: {"choices":[]}\r\n\r\ndata: {"choices":[],"usage":{"total_tokens":8}}\r\n\r\n`, 8],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...cases), fc.array(fc.nat({ max: 5000 }), { maxLength: 30 }), ([shape, stream, body, want], cuts) => {
        assert.equal(read(shape, stream, body, cuts), want);
      }),
      { numRuns: 300 },
    );
  });

  it('gives up (unknown usage, charged as such) past its memory bound rather than hold an unbounded event', () => {
    const r = usageReader('responses', true);
    r.push(Buffer.from('event: response.completed\ndata: {"type":"response.completed","response":{"instructions":"'));
    const mib = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i <= MAX_USAGE_BODY_BYTES / mib.length; i++) r.push(mib);
    r.push(Buffer.from('","usage":{"total_tokens":5}}}\n\n'));
    assert.equal(r.total(), undefined);
  });
});
