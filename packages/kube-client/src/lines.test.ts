import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '@kars/kube-core';
import type { KubeObject, WatchEvent } from '@kars/kube-core';
import { LineSplitter } from './lines.js';

const ev = (name: string, v: string): WatchEvent => ({
  type: 'MODIFIED',
  object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, resourceVersion: '7' }, data: { v } } as KubeObject,
});

/** Feed `bytes` in pieces cut at `cuts` (sorted offsets); every event the splitter yields, in order. */
function feed(bytes: Buffer, cuts: number[]): WatchEvent[] {
  const s = new LineSplitter<KubeObject>(new FakeClock(), undefined);
  const out: WatchEvent[] = [];
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    out.push(...s.push(bytes.subarray(at, c)));
    at = c;
  }
  return out;
}

describe('LineSplitter', () => {
  // Multi-byte UTF-8 (2, 3 and 4 bytes), blank lines, a CRLF and spaces around an event.
  const events = [ev('a', 'plain'), ev('b', 'é ü ñ'), ev('c', '日本語テキスト'), ev('d', '🎉 emoji'), ev('e', '')];
  const text = `${JSON.stringify(events[0])}\n\n${JSON.stringify(events[1])}\r\n ${JSON.stringify(events[2])} \n  \n${JSON.stringify(events[3])}\n${JSON.stringify(events[4])}\n`;
  const bytes = Buffer.from(text, 'utf8');

  it('yields the same events however the bytes are cut, even inside a multi-byte character', () => {
    assert.deepEqual(feed(bytes, []), events);
    for (let i = 0; i <= bytes.length; i++) assert.deepEqual(feed(bytes, [i]), events, `cut at ${i}`);
    // Every byte its own chunk.
    assert.deepEqual(
      feed(
        bytes,
        Array.from({ length: bytes.length }, (_, i) => i),
      ),
      events,
    );
  });

  it('keeps an unfinished last line until its newline arrives', () => {
    const s = new LineSplitter<KubeObject>(new FakeClock(), undefined);
    const line = Buffer.from(`${JSON.stringify(events[1])}\n`, 'utf8');
    assert.deepEqual(s.push(line.subarray(0, 10)), []);
    assert.deepEqual(s.push(line.subarray(10, line.length - 1)), []);
    assert.deepEqual(s.push(line.subarray(line.length - 1)), [events[1]]);
  });

  it("a malformed line throws JSON.parse's own SyntaxError", () => {
    const s = new LineSplitter<KubeObject>(new FakeClock(), undefined);
    let expected: unknown;
    try {
      JSON.parse('{"type":"ADDED",');
    } catch (err) {
      expected = err;
    }
    assert.throws(
      () => s.push(Buffer.from('{"type":"ADDED",\n')),
      (err: unknown) => err instanceof SyntaxError && err.message === (expected as SyntaxError).message,
    );
  });

  it('stamps lastByteAt at every chunk, on its clock', () => {
    const clock = new FakeClock();
    const s = new LineSplitter<KubeObject>(clock, undefined);
    const t0 = s.lastByteAt;
    clock.advance(250);
    s.push(Buffer.from('{"type":'));
    assert.equal(s.lastByteAt, t0 + 250);
  });
});
