import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SseEventSplitter, SseGate, eventData, usageFromJsonTail, usageFromSseText } from './sse.js';
import { safetyRules as cs } from '../testing/rules.js';

const frame = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const pfr = (hate: string): string =>
  frame({
    choices: [],
    prompt_filter_results: [{ prompt_index: 0, content_filter_results: { hate: { filtered: false, severity: hate } } }],
  });
const delta = (content: string): string => frame({ choices: [{ index: 0, delta: { content } }] });

/** Feed `text` in pieces of `size` bytes; returns what the gate let out and the refusal, if any. */
function run(gate: SseGate, text: string, size: number): { out: string; blockedCode: string | undefined } {
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) {
    const g = gate.push(bytes.subarray(i, i + size));
    out.push(g.out);
    if (g.blocked) return { out: Buffer.concat(out).toString(), blockedCode: g.blocked.body.error.code };
  }
  const g = gate.end();
  out.push(g.out);
  return { out: Buffer.concat(out).toString(), blockedCode: g.blocked?.body.error.code };
}

describe('SseEventSplitter', () => {
  it('splits on blank lines (LF and CRLF) and holds an unfinished event back', () => {
    const s = new SseEventSplitter();
    assert.deepEqual(s.push(Buffer.from('data: a\n\ndata: b\r\n\r\nda')).map(String), ['data: a\n\n', 'data: b\r\n\r\n']);
    assert.deepEqual(s.push(Buffer.from('ta: c\n')).map(String), []);
    assert.deepEqual(s.push(Buffer.from('\n')).map(String), ['data: c\n\n']);
    assert.equal(s.drain().length, 0);
  });

  it('never cuts a multi-byte character when an event is split inside it', () => {
    const s = new SseEventSplitter();
    const bytes = Buffer.from('data: "héllo ✓"\n\n');
    const events = [...s.push(bytes.subarray(0, 9)), ...s.push(bytes.subarray(9))];
    assert.deepEqual(events.map(String), ['data: "héllo ✓"\n\n']);
  });
});

describe('eventData', () => {
  it('joins data lines, drops one leading space, and is undefined for comments', () => {
    assert.equal(eventData('data: {"a":1}\n\n'), '{"a":1}');
    assert.equal(eventData('event: x\r\ndata:one\r\ndata: two\r\n\r\n'), 'one\ntwo');
    assert.equal(eventData(': keep-alive\n\n'), undefined);
  });
});

describe('usageFromSseText', () => {
  it('takes total_tokens from the last data line that carries a usage object', () => {
    const text =
      frame({ usage: { total_tokens: 5 } }) +
      frame({ usage: null }) +
      frame({ choices: [], usage: { total_tokens: 42 } }) +
      'data: [DONE]\n\n';
    assert.equal(usageFromSseText(text), 42);
    assert.equal(usageFromSseText(frame({ usage: null }) + 'data: [DONE]\n\n'), undefined);
    assert.equal(usageFromSseText('{"usage":{"total_tokens":3}} truncated'), undefined);
  });
});

describe('usageFromJsonTail', () => {
  it('reads total_tokens from the usage object of a body without parsing the rest', () => {
    const body = {
      choices: [{ message: { content: 'we discuss "usage": {"total_tokens": 999} and } braces {' } }],
      usage: {
        prompt_tokens: 1,
        completion_tokens: 2,
        total_tokens: 3,
        prompt_tokens_details: { cached_tokens: 0 },
        note: 'a } in a string',
      },
    };
    assert.equal(usageFromJsonTail(Buffer.from(JSON.stringify(body))), 3);
    assert.equal(usageFromJsonTail(Buffer.from(JSON.stringify(body, null, 2))), 3);
  });

  it('is undefined for a missing, null, truncated or malformed usage', () => {
    for (const text of [
      '{"choices":[]}',
      '{"usage":null}',
      '{"usage":{"total_tokens":5',
      '{"usage":{"total_tokens":"5"}}',
      '{"usage" 5}',
      'not json "usage": {',
    ]) {
      assert.equal(usageFromJsonTail(Buffer.from(text)), undefined, text);
    }
  });
});

describe('SseGate', () => {
  const stream = pfr('safe') + delta('Hello') + delta(' world') + frame({ choices: [], usage: { total_tokens: 9 } }) + 'data: [DONE]\n\n';

  it('passes a clean stream through byte for byte however it is split', () => {
    for (const size of [1, 3, 7, 64, 10_000]) {
      const gate = new SseGate(cs({ hate: 'Low' }));
      assert.deepEqual(run(gate, stream, size), { out: stream, blockedCode: undefined });
    }
  });

  it('is open from the start without a floor', () => {
    const gate = new SseGate(undefined);
    assert.equal(gate.gating, false);
    const chunk = Buffer.from('data: {"partial');
    assert.equal(gate.push(chunk).out, chunk);
  });

  it('blocks at the first annotated event and lets out only the events before it', () => {
    const role = frame({ choices: [{ index: 0, delta: { role: 'assistant' } }] });
    const text = `: hi\n\n${role}${pfr('high')}${delta('secret')}data: [DONE]\n\n`;
    for (const size of [2, 5, 1000]) {
      assert.deepEqual(run(new SseGate(cs({ hate: 'Medium' })), text, size), {
        out: `: hi\n\n${role}`,
        blockedCode: 'inference_policy_content_safety_exceeded',
      });
    }
  });

  it('judges only the first annotated event', () => {
    const text = pfr('safe') + pfr('high') + 'data: [DONE]\n\n';
    assert.deepEqual(run(new SseGate(cs({ hate: 'Low' })), text, 4), { out: text, blockedCode: undefined });
  });

  it('with Prompt Shields required, blocks when the first data event has no annotations', () => {
    const text = delta('Hello') + pfr('safe') + 'data: [DONE]\n\n';
    assert.deepEqual(run(new SseGate(cs({ requirePromptShields: true })), text, 6), {
      out: '',
      blockedCode: 'inference_policy_prompt_shields_required',
    });
  });

  it('judges an unterminated last event at the end of the stream instead of letting it slip through', () => {
    assert.deepEqual(run(new SseGate(cs({ hate: 'Low' })), pfr('high').trimEnd(), 8), {
      out: '',
      blockedCode: 'inference_policy_content_safety_exceeded',
    });
  });

  it('does not crash on garbage and, with Prompt Shields required, blocks it', () => {
    const junk = 'data: {not json prompt_filter_results\n\n\u0000\u0001garbage';
    assert.equal(run(new SseGate(cs({ requirePromptShields: true })), junk, 3).blockedCode, 'inference_policy_prompt_shields_required');
    assert.deepEqual(run(new SseGate(cs({ hate: 'Low' })), junk, 3), { out: junk, blockedCode: undefined });
  });
});
