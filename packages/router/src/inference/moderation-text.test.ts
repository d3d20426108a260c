/**
 * moderation-text: what an input or output guardrail stage is asked about (ADR 0026), tested
 * directly. The HTTP-level holes are pinned in hostile-guardrail-coverage.test.ts and the random
 * placements in guardrail-coverage.property.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { answerTexts, requestTexts } from './moderation-text.js';
import { CHAT } from './apis.js';

const chunk = (index: number, delta: unknown) => ({ object: 'chat.completion.chunk', choices: [{ index, delta, finish_reason: null }] });

describe('requestTexts', () => {
  it('property: every string value and key of any JSON object is judged, or the request is refused as unjudgeable', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (body) => {
        const m = requestTexts(body);
        if (m.unjudgeable.length > 0) return;
        const texts = new Set(m.texts);
        const walk = (v: unknown): void => {
          if (typeof v === 'string') assert.ok(v === '' || texts.has(v), JSON.stringify(v));
          else if (Array.isArray(v)) v.forEach(walk);
          else if (v !== null && typeof v === 'object')
            for (const [k, x] of Object.entries(v)) {
              assert.ok(k === '' || texts.has(k), JSON.stringify(k));
              walk(x);
            }
        };
        walk(body);
        assert.equal(new Set(m.texts).size, m.texts.length, 'texts are distinct');
      }),
      { numRuns: 2000 },
    );
  });

  it('reports parts a text moderator cannot judge, and nothing for text parts (chat rules, and data URLs anywhere)', () => {
    const unjudgeable = (body: Record<string, unknown>): string[] => [...CHAT.unjudgeable(body), ...requestTexts(body).unjudgeable];
    const parts = (...content: unknown[]) => unjudgeable({ messages: [{ role: 'user', content }] });
    assert.deepEqual(parts({ type: 'text', text: 'a' }, { type: 'input_text', text: 'b' }, { type: 'refusal', refusal: 'c' }), []);
    assert.deepEqual(parts({ type: 'image_url', image_url: { url: 'https://x/y.png' } }), ['messages[0].content[0] (image_url)']);
    assert.deepEqual(parts({ text: 'no type' }), ['messages[0].content[0] (part without a type)']);
    assert.deepEqual(parts({ type: 'text', text: 'x', file: { file_id: 'f' } }), ['messages[0].content[0] (text part carrying file)']);
    assert.deepEqual(unjudgeable({ messages: [{ role: 'assistant', audio: { id: 'audio_1' } }] }), ['messages[0].audio (spoken audio)']);
    assert.deepEqual(unjudgeable({ metadata: { k: 'data:image/png;base64,AAAA' } }), ['metadata.k (base64 data URL)']);
    // A tool schema property called "content" is not a content list.
    assert.deepEqual(
      unjudgeable({ tools: [{ type: 'function', function: { name: 'f', parameters: { properties: { content: { type: 'string' } } } } }] }),
      [],
    );
  });

  it('keeps the __proto__ key JSON.parse makes an own property', () => {
    const body = JSON.parse('{"messages":[],"__proto__":{"x":"hidden"}}') as Record<string, unknown>;
    assert.ok(requestTexts(body).texts.includes('hidden'));
  });
});

describe('answerTexts', () => {
  it('joins streamed fragments per choice and per tool call index, however they interleave', () => {
    const docs = [
      chunk(0, { role: 'assistant', tool_calls: [{ index: 0, id: 'c0', type: 'function', function: { name: 'send', arguments: '' } }] }),
      chunk(1, { content: 'kars-' }),
      chunk(0, { tool_calls: [{ index: 1, id: 'c1', type: 'function', function: { name: 'other', arguments: 'z1' } }] }),
      chunk(0, { tool_calls: [{ index: 0, function: { arguments: '{"a":"kars-fl' } }] }),
      chunk(1, { content: 'flag-me' }),
      chunk(0, { tool_calls: [{ index: 1, function: { arguments: 'z2' } }] }),
      chunk(0, { tool_calls: [{ index: 0, function: { arguments: 'ag-me"}' } }] }),
      chunk(0, { refusal: 'no ' }),
      chunk(0, { refusal: 'way' }),
      chunk(0, { function_call: { name: 'f', arguments: '{' } }),
      chunk(0, { function_call: { arguments: '}' } }),
      chunk(0, { audio: { id: 'a', transcript: 'spo' } }),
      chunk(0, { audio: { transcript: 'ken' } }),
    ];
    const m = answerTexts(docs);
    assert.deepEqual(m.unjudgeable, []);
    for (const t of ['{"a":"kars-flag-me"}', 'kars-flag-me', 'z1z2', 'send', 'other', 'no way', '{}', 'spoken'])
      assert.ok(m.texts.includes(t), t);
  });

  it('judges a JSON answer whole: content, tool calls, function call, refusal, reasoning, and strings outside the message', () => {
    const m = answerTexts([
      {
        id: 'chatcmpl-x',
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c', type: 'function', function: { name: 'n', arguments: '{"q":1}' } }],
              function_call: { name: 'fc', arguments: 'fa' },
              refusal: 'r',
              reasoning_content: 'thinking',
            },
            logprobs: { content: [{ token: 'tok', logprob: 0 }] },
          },
        ],
      },
    ]);
    for (const t of ['chatcmpl-x', 'n', '{"q":1}', 'fc', 'fa', 'r', 'thinking', 'tok']) assert.ok(m.texts.includes(t), t);
  });

  it('reports what it cannot judge: an answer or event that is not JSON, audio data, a data URL', () => {
    assert.deepEqual(answerTexts([undefined]).unjudgeable, ['the answer (not JSON)']);
    assert.deepEqual(answerTexts([chunk(0, { content: 'a' }), undefined]).unjudgeable, ['event 1 (not JSON)']);
    assert.deepEqual(answerTexts([chunk(0, { audio: { data: 'UklG' } }), chunk(0, { audio: { data: 'Rg==' } })]).unjudgeable, [
      'choices[0].delta.audio.data (audio)',
    ]);
    assert.equal(answerTexts([chunk(0, { content: 'data:image/png;' }), chunk(0, { content: 'base64,AAAA' })]).unjudgeable.length, 1);
    assert.deepEqual(answerTexts([{}]), { texts: [], unjudgeable: [] });
    // An image in an answer (OpenRouter-style `images`, an image_url part) is an image, whatever its URL says.
    const img = { type: 'image_url', image_url: { url: 'https://example.com/out.png' } };
    assert.deepEqual(
      answerTexts([{ choices: [{ index: 0, message: { role: 'assistant', content: 'see', images: [img] } }] }]).unjudgeable,
      ['choices[0].message.images (image)'],
    );
    assert.deepEqual(answerTexts([{ choices: [{ index: 0, message: { role: 'assistant', content: [img] } }] }]).unjudgeable, [
      'choices[0].message.content[0].image_url (image)',
    ]);
  });

  it('joins fragments of a stream shape it does not know, and judges a field every event repeats once', () => {
    const ev = (text: string) => ({ id: 'msg_1', type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
    const m = answerTexts([ev('kars-fl'), ev('ag-me'), ev('!')]);
    assert.ok(m.texts.includes('kars-flag-me!'), JSON.stringify(m.texts));
    assert.equal(m.texts.filter((t) => t.includes('msg_1')).length, 1);
    assert.ok(m.texts.includes('msg_1'));
  });

  it('judges a phrase split across parts, fields or tool calls whole: the values joined (attacker pass)', () => {
    const split = requestTexts({
      model: 'm',
      messages: [{ role: 'user', content: [...'kars-flag-me'].map((c) => ({ type: 'text', text: c })) }],
    });
    assert.ok(
      split.texts.some((t) => t.includes('kars-flag-me')),
      JSON.stringify(split.texts),
    );
    const words = requestTexts({
      model: 'm',
      messages: [
        { role: 'user', content: 'kill' },
        { role: 'user', content: 'him' },
      ],
    });
    assert.ok(
      words.texts.some((t) => t.includes('kill him')),
      JSON.stringify(words.texts),
    );
    const calls = answerTexts([
      {
        choices: [
          {
            index: 0,
            message: {
              tool_calls: [...'kars-flag-me'].map((c, i) => ({ id: `c${i}`, type: 'function', function: { name: 'say', arguments: c } })),
            },
          },
        ],
      },
    ]);
    assert.ok(
      calls.texts.some((t) => t.includes('kars-flag-me')),
      JSON.stringify(calls.texts),
    );
  });
});
