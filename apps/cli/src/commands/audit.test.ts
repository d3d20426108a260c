/**
 * `kars audit` (issue 21 item 3), as a user runs it: a real router with a decision log rotating into
 * small files, `kars audit tail` reading it through the admin listener the way it finds the kars up
 * router (the data dir's `router-admin-url` and `router-admin-token`), and `kars audit verify` passing
 * on the clean chain across rotation and failing, naming the record, on an edited, a removed, a
 * reordered and a truncated one.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@kars/kube-core';
import { RuntimeMetrics } from '@kars/kube-runtime';
import { startRouter, type RunningRouter } from '@kars/router';
import { connectStatus, startOpenAIStub, type OpenAIStub } from '@kars/router/stubs';
import { runKars } from '../testing/run-kars.js';
import { sinceMs } from './audit.js';

const TOKEN = 'cli-audit-token';

describe('kars audit', () => {
  let root: string;
  let logDir: string;
  let stub: OpenAIStub;
  let router: RunningRouter;
  const ac = new AbortController();

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'kars-audit-'));
    const policy = join(root, 'policy');
    for (const sub of ['inference', 'policies', 'egress', 'egress-approvals']) mkdirSync(join(policy, sub), { recursive: true });
    writeFileSync(
      join(policy, 'inference', 'inference-policy.json'),
      JSON.stringify({
        appliesTo: { sandboxName: 'sb', sandboxMatchLabels: {}, action: null },
        tokenBudget: { perRequestTokens: 100, dailyTokens: null, monthlyTokens: null },
        contentSafety: null,
        modelPreference: null,
        provider: null,
        guardrails: null,
        displayName: null,
      }),
    );
    logDir = join(root, 'decisions');
    stub = await startOpenAIStub();
    router = await startRouter(
      {
        sandbox: 'sb',
        namespace: 'ns',
        listen: '127.0.0.1:0',
        upstream: stub.url,
        adminListen: '127.0.0.1:0',
        adminToken: TOKEN,
        egressListen: '127.0.0.1:0',
        source: { kind: 'dir', dir: policy },
        decisionLog: { dir: logDir, maxBytes: 1500 },
        instance: 'cli-test',
        metrics: new RuntimeMetrics(),
        log: silentLogger,
      },
      ac.signal,
    );
    for (let i = 0; i < 12; i++) {
      const res = await fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: i % 3 === 0 ? 5000 : 10 }),
      });
      await res.text();
      assert.equal(res.status, i % 3 === 0 ? 429 : 200);
    }
    // Egress the sandbox is refused (it has no allowlist): what `kars egress learned` lists.
    for (const target of ['denied.example:443', 'other.example:8443', 'denied.example:443', 'denied.example:443'])
      assert.equal(await connectStatus(router.egressUrl as string, target), 403);
    // What kars up leaves in its data dir for `kars audit tail`.
    writeFileSync(join(root, 'router-admin-url'), `${router.adminUrl as string}\n`);
    writeFileSync(join(root, 'router-admin-token'), `${TOKEN}\n`);
  });

  after(async () => {
    ac.abort();
    await router.done;
    await stub.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('tail reads the records from the router kars up recorded, with filters', async () => {
    const all = await runKars(['audit', 'tail', '--data-dir', root, '-o', 'json']);
    assert.equal(all.code, 0, all.stderr);
    const lines = all.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; decision?: string; reason?: string });
    assert.equal(lines.filter((l) => l.type === 'decision').length, 16);
    const denied = await runKars(['audit', 'tail', '--data-dir', root, '--decision', 'deny', '--kind', 'inference', '-o', 'json']);
    assert.equal(denied.code, 0, denied.stderr);
    const d = denied.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; reason?: string })
      .filter((l) => l.type === 'decision');
    assert.deepEqual(
      d.map((l) => l.reason),
      ['per_request_tokens_exceeded', 'per_request_tokens_exceeded', 'per_request_tokens_exceeded', 'per_request_tokens_exceeded'],
    );
    const tableOut = await runKars(['audit', 'tail', '--data-dir', root, '--since', '1h']);
    assert.equal(tableOut.code, 0, tableOut.stderr);
    assert.match(tableOut.stdout, /^TIME\s+KIND\s+DECISION\s+REASON\s+TARGET\s+TOKENS\s+POLICY/);
    assert.match(tableOut.stdout, /inference\s+DENY\s+per_request_tokens_exceeded\s+OpenAI chat completions gpt-4o/);
    const wrongToken = join(root, 'wrong-token');
    writeFileSync(wrongToken, 'nope');
    const refused = await runKars(['audit', 'tail', '--admin-url', router.adminUrl as string, '--admin-token-file', wrongToken]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /answered 401/);
  });

  it('verify passes on the clean chain across rotation', async () => {
    assert.ok(readdirSync(logDir).length >= 3, `the log rotated (${readdirSync(logDir).join(', ')})`);
    const v = await runKars(['audit', 'verify', logDir]);
    assert.equal(v.code, 0, v.stderr);
    assert.match(v.stdout, /^ok: 17 records in \d+ file\(s\), seq 0\.\.16, from the genesis record; no gaps/);
  });

  /** A copy of the log with `fn` applied to the lines of its second file; the verify run on it. */
  async function tampered(fn: (lines: string[]) => string): Promise<{ code: number | null; stderr: string }> {
    const copy = mkdtempSync(join(root, 'copy-'));
    cpSync(logDir, copy, { recursive: true });
    const second = (readdirSync(copy).sort()[1] as string) ?? '';
    const path = join(copy, second);
    const lines = readFileSync(path, 'utf8').split('\n').slice(0, -1);
    assert.ok(lines.length >= 3, 'the second file has lines to tamper with');
    writeFileSync(path, fn(lines));
    const r = await runKars(['audit', 'verify', copy]);
    return { code: r.code, stderr: r.stderr };
  }
  const seqOf = (line: string): number => (JSON.parse(line) as { seq: number }).seq;
  const joined = (ls: string[]): string => ls.map((l) => `${l}\n`).join('');

  it('verify names an edited record', async () => {
    let seq = -1;
    const r = await tampered((ls) => {
      seq = seqOf(ls[0] as string);
      ls[0] = (ls[0] as string).replace('"decision":"deny"', '"decision":"allow"').replace('"reason":"allowed"', '"reason":"allowed!"');
      return joined(ls);
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`chain broken \\(altered\\): line 1 of .*decisions-\\d{12}\\.jsonl \\(seq ${seq}\\) was altered`));
  });

  it('verify names a removed record', async () => {
    let seq = -1;
    const r = await tampered((ls) => {
      seq = seqOf(ls[1] as string);
      ls.splice(1, 1);
      return joined(ls);
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`chain broken \\(removed\\): .*record ${seq} was removed`));
  });

  it('verify names a reordered record', async () => {
    let seq = -1;
    const r = await tampered((ls) => {
      seq = seqOf(ls[2] as string);
      [ls[1], ls[2]] = [ls[2] as string, ls[1] as string];
      return joined(ls);
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`chain broken \\(reordered\\): line 2 of .* \\(seq ${seq}\\) comes before seq ${seq - 1}`));
  });

  it('verify names a truncated record', async () => {
    const r = await tampered((ls) => joined(ls).slice(0, -10));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /chain broken \(truncated\): line \d+ of .* is cut short/);
  });

  it('kars egress learned lists the hosts the sandbox was refused, with counts and last-seen times', async () => {
    const r = await runKars(['egress', 'learned', 'sb', '--data-dir', root, '-o', 'json']);
    assert.equal(r.code, 0, r.stderr);
    const hosts = JSON.parse(r.stdout) as Array<{ host: string; port: number; count: number; lastSeen: string }>;
    assert.deepEqual(
      hosts.map((h) => [h.host, h.port, h.count]),
      [
        ['denied.example', 443, 3],
        ['other.example', 8443, 1],
      ],
    );
    for (const h of hosts) assert.ok(Date.now() - Date.parse(h.lastSeen) < 600_000, h.lastSeen);
    const t = await runKars(['egress', 'learned', 'sb', '--data-dir', root]);
    assert.equal(t.code, 0, t.stderr);
    assert.match(t.stdout, /^HOST\s+PORT\s+REFUSED\s+LAST SEEN\ndenied\.example\s+443\s+3\s/);
    const other = await runKars(['egress', 'learned', 'another-sandbox', '--data-dir', root, '-o', 'json']);
    assert.deepEqual(JSON.parse(other.stdout), []);
  });

  it('--since takes a duration or an RFC 3339 time', () => {
    assert.equal(sinceMs('10m', 1_000_000), 400_000);
    assert.equal(sinceMs('2h', 10_000_000), 2_800_000);
    assert.equal(sinceMs('2026-01-01T00:00:00Z', 0), Date.parse('2026-01-01T00:00:00Z'));
    assert.equal(sinceMs('yesterday', 0), undefined);
  });
});
