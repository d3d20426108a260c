import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { ApiError } from '@kars/kube-core';
import { YamlDecoder } from './yaml.js';

// A valid document whose 1 MiB quoted scalar the YAML lexer reads a character at a time: about
// 0.2 s of the thread's CPU on a quiet machine, four times the budgets below.
const COSTLY = `a: "${'x'.repeat(1024 * 1024)}"\n`;
const linux = existsSync('/proc/thread-self');

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.code, 400);
    return err.message;
  }
  assert.fail('the body was decoded');
}

describe('YamlDecoder time limit', () => {
  it(
    'refuses a body that costs the YAML thread more than its CPU budget, and decodes the next on a fresh thread',
    {
      skip: !linux && 'no /proc/thread-self: the limit is on wall time there',
    },
    async () => {
      const d = new YamlDecoder({ cpuBudgetMs: 50 });
      try {
        assert.deepEqual(await d.decode('warm: up\n'), { warm: 'up' });
        assert.match(await refusal(d.decode(COSTLY)), /^error decoding YAML: the body took more than 0\.05 s of CPU to decode$/);
        assert.deepEqual(await d.decode('a: 1\n'), { a: 1 }, 'the replaced thread decodes the next body');
      } finally {
        await d.close();
      }
    },
  );

  it('does not count wall time the thread spends without the CPU, up to the wall cap', async () => {
    // A thread that never gets a core: its CPU time stands still however long the body takes.
    const starved = (): number => 0;
    const d = new YamlDecoder({ cpuBudgetMs: 50, threadCpuMs: starved });
    try {
      const v = (await d.decode(COSTLY)) as { a: string };
      assert.equal(v.a.length, 1024 * 1024, 'decoded in full although it took many times the budget in wall time');
    } finally {
      await d.close();
    }
    const capped = new YamlDecoder({ cpuBudgetMs: 50, wallCapMs: 100, threadCpuMs: starved });
    try {
      assert.match(await refusal(capped.decode(COSTLY)), /^error decoding YAML: the body took more than 0\.1 s to decode$/);
    } finally {
      await capped.close();
    }
  });

  it('falls back to a wall-time limit where the thread CPU time cannot be read', async () => {
    const d = new YamlDecoder({ cpuBudgetMs: 50, threadCpuMs: () => undefined });
    try {
      assert.match(await refusal(d.decode(COSTLY)), /^error decoding YAML: the body took more than 0\.05 s to decode$/);
    } finally {
      await d.close();
    }
  });
});
