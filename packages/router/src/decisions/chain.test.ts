/**
 * The decision log's chain (issue 21 item 3, `kars audit verify`): a log the real
 * {@link DecisionLog} wrote, rotated over several files, verifies clean; an edited, a removed, a
 * reordered and a truncated record are each caught and named; a gap the log wrote when its queue
 * was full is in the chain. Properties (fast-check) over random logs and random tampering.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { DecisionLog, logFiles } from './log.js';
import { verifyChain, type ChainFile } from './chain.js';
import type { DecisionRecord } from './record.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function record(i: number): DecisionRecord {
  return {
    type: 'decision',
    time: new Date(1_700_000_000_000 + i).toISOString(),
    sandbox: 'sb',
    instance: 'r1',
    requestId: `r1-${i}`,
    kind: 'egress',
    target: { host: `h${i}.example`, port: 443, via: 'CONNECT' },
    decision: i % 3 === 0 ? 'deny' : 'allow',
    reason: i % 3 === 0 ? 'denied' : 'baseline',
    tokens: null,
    policies: [{ kind: 'EgressApproval', name: null, generation: null, digest: 'sha256:00' }],
  };
}

/** Write `n` records through a real log (small files, so it rotates), optionally restarting it midway. */
async function writeLog(
  n: number,
  opts: { maxBytes?: number; files?: number; restartAt?: number; queue?: number } = {},
): Promise<{ dir: string; files: ChainFile[]; registry: Registry }> {
  const dir = mkdtempSync(join(tmpdir(), 'kars-chain-'));
  dirs.push(dir);
  const registry = new Registry();
  const open = (): DecisionLog =>
    new DecisionLog({
      dir,
      sandbox: 'sb',
      instance: 'r1',
      maxBytes: opts.maxBytes ?? 2000,
      files: opts.files ?? 100,
      wallNow: () => 1_700_000_000_000,
      registry: new Registry(),
      ...(opts.queue ? { queue: opts.queue } : {}),
    });
  let log = open();
  for (let i = 0; i < n; i++) {
    if (i === opts.restartAt) {
      await log.close();
      log = open();
    }
    log.write(record(i));
    // Let the drain run now and then, so batches (and rotations) interleave with writes.
    if (i % 7 === 0) await log.flushed();
  }
  await log.close();
  return { dir, files: read(dir), registry };
}

function read(dir: string): ChainFile[] {
  return logFiles(dir).map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
}

/** All lines of a chain, with where each is. */
function lines(files: ChainFile[]): Array<{ file: number; line: number; text: string }> {
  const out: Array<{ file: number; line: number; text: string }> = [];
  files.forEach((f, fi) =>
    f.text
      .split('\n')
      .slice(0, -1)
      .forEach((text, li) => out.push({ file: fi, line: li + 1, text })),
  );
  return out;
}

/** `files` with line `at` (an index into {@link lines}) replaced by `text`, or removed (undefined). */
function withLine(files: ChainFile[], at: number, text: string | undefined): ChainFile[] {
  const all = lines(files);
  const target = all[at] as (typeof all)[number];
  return files.map((f, fi) => {
    if (fi !== target.file) return f;
    const ls = f.text.split('\n').slice(0, -1);
    if (text === undefined) ls.splice(target.line - 1, 1);
    else ls[target.line - 1] = text;
    return { name: f.name, text: ls.map((l) => `${l}\n`).join('') };
  });
}

describe('decision log chain (kars audit verify)', () => {
  it('a log written across rotations and a restart verifies clean, from its genesis', async () => {
    const { files } = await writeLog(120, { restartAt: 60 });
    assert.ok(files.length >= 4, `rotated into ${files.length} files`);
    const v = verifyChain(files);
    assert.equal(v.ok, true, JSON.stringify(v));
    // 120 decisions and two start records (one per open of the log).
    assert.equal(v.records, 122);
    assert.equal(v.fromGenesis, true);
    assert.equal(v.firstSeq, 0);
    assert.equal(v.lastSeq, 121);
    // Each file after the first starts where the last one ended.
    for (let i = 1; i < files.length; i++) {
      const first = JSON.parse((files[i] as ChainFile).text.split('\n')[0] as string) as { seq: number };
      assert.equal((files[i] as ChainFile).name, `decisions-${String(first.seq).padStart(12, '0')}.jsonl`);
    }
    // The head catches an edit of the last line, which nothing after it could.
    const head = v.head as string;
    assert.equal(verifyChain(files, head).ok, true);
    const all = lines(files);
    const last = all.length - 1;
    const edited = withLine(files, last, (all[last] as { text: string }).text.replace('"deny"', '"allow"').replace('"allow"', '"deny"'));
    const h = verifyChain(edited, head);
    assert.equal(h.ok, false);
    assert.equal(!h.ok && h.problem.kind, 'head');
  });

  it('keeps only the newest files, and what is kept still verifies (not from genesis)', async () => {
    const { files } = await writeLog(150, { files: 3 });
    assert.equal(files.length, 3);
    const v = verifyChain(files);
    assert.equal(v.ok, true, JSON.stringify(v));
    assert.equal(v.fromGenesis, false);
  });

  it('names an edited record', async () => {
    const { files } = await writeLog(40);
    const all = lines(files);
    const at = 17;
    const orig = (all[at] as { text: string }).text;
    const forged = orig.replace(/"decision":"(allow|deny)"/, (_m, d: string) => `"decision":"${d === 'allow' ? 'deny' : 'allow'}"`);
    assert.notEqual(forged, orig);
    const v = verifyChain(withLine(files, at, forged));
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.problem.kind, 'altered');
    assert.equal(v.problem.seq, (JSON.parse(orig) as { seq: number }).seq);
    assert.match(v.problem.message, /was altered/);
  });

  it('names a removed record', async () => {
    const { files } = await writeLog(40);
    const all = lines(files);
    const at = 21;
    const gone = (JSON.parse((all[at] as { text: string }).text) as { seq: number }).seq;
    const v = verifyChain(withLine(files, at, undefined));
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.problem.kind, 'removed');
    assert.equal(v.problem.seq, gone + 1, 'names the record after the gap');
    assert.match(v.problem.message, new RegExp(`record ${gone} was removed`));
  });

  it('names a reordered record', async () => {
    const { files } = await writeLog(40);
    const all = lines(files);
    // Swap two neighbours within one file.
    let at = 10;
    while ((all[at] as { file: number }).file !== (all[at + 1] as { file: number }).file) at++;
    const a = (all[at] as { text: string }).text;
    const b = (all[at + 1] as { text: string }).text;
    const v = verifyChain(withLine(withLine(files, at, b), at + 1, a));
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.problem.kind, 'reordered');
    assert.equal(v.problem.seq, (JSON.parse(b) as { seq: number }).seq);
  });

  it('names a truncated record (a file cut mid-line) and a file cut at a line boundary before the next file', async () => {
    const { files } = await writeLog(40);
    const lastFile = files[files.length - 1] as ChainFile;
    const cut = [...files.slice(0, -1), { name: lastFile.name, text: lastFile.text.slice(0, lastFile.text.length - 20) }];
    const v = verifyChain(cut);
    assert.equal(v.ok, false);
    if (!v.ok) assert.equal(v.problem.kind, 'truncated');
    // Drop the last line of a file that is not the last: the next file's first line no longer follows.
    const first = files[0] as ChainFile;
    const ls = first.text.split('\n').slice(0, -1);
    const shorter = [
      {
        name: first.name,
        text: ls
          .slice(0, -1)
          .map((l) => `${l}\n`)
          .join(''),
      },
      ...files.slice(1),
    ];
    const w = verifyChain(shorter);
    assert.equal(w.ok, false);
    if (!w.ok) assert.equal(w.problem.kind, 'removed');
  });

  it('a queue that overflows drops, counts, and writes a gap record into the chain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kars-chain-'));
    dirs.push(dir);
    const registry = new Registry();
    const log = new DecisionLog({ dir, sandbox: 'sb', instance: 'r1', queue: 10, wallNow: () => 0, registry });
    // 25 records in one tick: the queue holds 10, the other 15 are dropped.
    for (let i = 0; i < 25; i++) log.write(record(i));
    await log.close();
    const v = verifyChain(read(dir));
    assert.equal(v.ok, true, JSON.stringify(v));
    assert.deepEqual(
      v.gaps.map((g) => g.dropped),
      [15],
    );
    const metrics = await registry.getSingleMetricAsString('kars_router_decisions_dropped_total');
    assert.match(metrics, /kars_router_decisions_dropped_total 15/);
  });

  it('property: any single edit, removal or swap of lines is caught, and the first break named is at or after it', async () => {
    const { files } = await writeLog(30, { maxBytes: 1500 });
    const all = lines(files);
    assert.equal(verifyChain(files).ok, true);
    fc.assert(
      fc.property(
        fc.nat({ max: all.length - 2 }),
        fc.constantFrom('edit', 'remove', 'swap'),
        fc.integer({ min: 1, max: 200 }),
        (at, how, pos) => {
          const l = all[at] as { text: string };
          let tampered: ChainFile[];
          if (how === 'edit') {
            const p = pos % l.text.length;
            const c = l.text[p] === 'a' ? 'b' : 'a';
            tampered = withLine(files, at, l.text.slice(0, p) + c + l.text.slice(p + 1));
          } else if (how === 'remove') tampered = withLine(files, at, undefined);
          else tampered = withLine(withLine(files, at, (all[at + 1] as { text: string }).text), at + 1, l.text);
          const v = verifyChain(tampered);
          assert.equal(v.ok, false, `${how} at line index ${at} went unseen`);
        },
      ),
      { numRuns: 300 },
    );
  });
});
