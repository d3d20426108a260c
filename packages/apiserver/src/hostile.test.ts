import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createCrds, simpleCrd, startApiserverProcess, startTestServer, TestClient } from './testing/harness.js';
import type { TestServer } from './testing/harness.js';

// Issue 9 item 6, apiserver side: bodies and clients that try to exhaust the server.

const CM = '/api/v1/namespaces/default/configmaps';
const YAML = { 'content-type': 'application/yaml' };

/** One big anchor and 99 aliases of it: ~1 MiB of YAML that would become a ~100 MB object. */
function aliasBomb(name: string): string {
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  annotations:\n    a: &big "${'x'.repeat(1024 * 1024)}"\n    list: [${Array(99).fill('*big').join(', ')}]\n`;
}

/** "Billion laughs": each level aliases the previous one ten times. */
function laughs(name: string): string {
  const lines = ['l0: &l0 "lol"'];
  for (let i = 1; i <= 9; i++)
    lines.push(
      `l${i}: &l${i} [${Array(10)
        .fill(`*l${i - 1}`)
        .join(', ')}]`,
    );
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  ${lines.join('\n  ')}\n`;
}

/** Deep nesting that used to block the event loop for seconds: flow, block and compact sequences. */
const deepFlow = (levels: number): string =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: ${'['.repeat(levels)}${']'.repeat(levels)}\n`;
const deepBlock = (levels: number): string =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n${Array.from({ length: levels }, (_, i) => `${' '.repeat(i + 1)}a:`).join('\n')} 1\n`;
const deepCompact = (levels: number): string =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  x:\n  ${'- '.repeat(levels)}x\n`;

/**
 * Run `op` and measure it: `ms` is wall time, `cpuMs` the CPU time this whole process spent meanwhile
 * (user + system, every thread: the client, the in-process server and its YAML thread). On the
 * shared 2-core CI machine wall time stretches with the load average (a body costing 0.6 s of CPU
 * took 7.7 s at load 26); CPU time does not, so bounds on the server's work are put on `cpuMs`.
 */
async function timed<T>(op: () => Promise<T>): Promise<{ value: T; ms: number; cpuMs: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await op();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  return { value, ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * Most CPU one hostile body may cost, refusal included. Refusing the worst of them (the 1 MiB alias
 * bomb, whose quoted scalar the YAML lexer reads in full) costs 0.2–0.3 s, up to 0.65 s when it also
 * starts the YAML thread or runs on a loaded machine; expanding or deeply parsing any of them costs
 * many seconds.
 */
const HOSTILE_CPU_MS = 2000;

describe('apiserver against hostile bodies and clients', () => {
  let ts: TestServer;
  before(async () => {
    ts = await startTestServer();
  });
  after(async () => {
    await ts.close();
  });

  it('refuses a YAML alias bomb with 400 before expanding it, and stores nothing', async (t) => {
    for (const [name, body] of [
      ['bomb', aliasBomb('bomb')],
      ['laughs', laughs('laughs')],
    ] as const) {
      const { value: r, ms, cpuMs } = await timed(() => ts.client.request('POST', CM, body, YAML));
      t.diagnostic(`${name}: refused in ${ms.toFixed(0)} ms, ${cpuMs.toFixed(0)} ms of CPU`);
      assert.equal(r.status, 400, `${name}: ${r.text.slice(0, 300)}`);
      assert.match(r.body.message, /alias/, name);
      assert.ok(cpuMs < HOSTILE_CPU_MS, `${name} refused with ${cpuMs.toFixed(0)} ms of CPU (${ms.toFixed(0)} ms wall)`);
      assert.equal((await ts.client.get(`${CM}/${name}`)).status, 404, `${name} was not stored`);
    }
    const ok = await ts.client.request(
      'POST',
      CM,
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: few-aliases\n  labels: &l {app: web}\n  annotations: *l\n',
      YAML,
    );
    assert.equal(ok.status, 201, `a document with a few small aliases is still accepted: ${ok.text.slice(0, 200)}`);
    assert.deepEqual(ok.body.metadata.annotations, { app: 'web' });
  });

  it('refuses deeply nested YAML and JSON with 400 quickly, without a 500 or a stalled server', async (t) => {
    const bodies: Array<[string, string, Record<string, string>]> = [
      ['yaml flow', deepFlow(1_000_000), YAML],
      ['yaml block', deepBlock(2000), YAML],
      ['yaml compact', deepCompact(1_000_000), YAML],
      [
        'json',
        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`,
        {},
      ],
      [
        'json objects',
        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":${'{"a":'.repeat(300_000)}1${'}'.repeat(300_000)}}`,
        {},
      ],
    ];
    for (const [name, body, headers] of bodies) {
      const { value: r, ms, cpuMs } = await timed(() => ts.client.request('POST', CM, body, headers));
      t.diagnostic(`${name}: refused in ${ms.toFixed(0)} ms, ${cpuMs.toFixed(0)} ms of CPU`);
      assert.equal(r.status, 400, `${name}: ${r.text.slice(0, 300)}`);
      assert.match(r.body.message, /nested more than 256 levels/, name);
      assert.ok(cpuMs < HOSTILE_CPU_MS, `${name} refused with ${cpuMs.toFixed(0)} ms of CPU (${ms.toFixed(0)} ms wall)`);
    }
    const apply = await ts.client.patch(`${CM}/deep`, deepFlow(1_000_000), 'apply', '?fieldManager=t');
    assert.equal(apply.status, 400, 'an apply patch (YAML) is held to the same limit');
    const nested = (n: number): string => `${'['.repeat(n)}${']'.repeat(n)}`;
    const atLimit = await ts.client.post(
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
      JSON.parse(
        `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x"},"spec":${nested(250)}}`,
      ),
    );
    assert.notEqual(atLimit.status, 500, 'nesting within the limit is decoded and judged on its merits');
    assert.match(atLimit.text, /Invalid|invalid/);
  });

  it('refuses an object over 1.5 MiB once decoded with 413, on create and on a patch that grows it, and keeps the old object', async () => {
    // A custom resource, as no kind-specific size rule applies to it: a ConfigMap is refused at 1 MiB by its own validation (422) first.
    const blobCrd = simpleCrd('example.com', 'Blob', {
      type: 'object',
      properties: { spec: { type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } } } },
    });
    await createCrds(ts.client, blobCrd);
    const BLOBS = '/apis/example.com/v1/namespaces/default/blobs';
    const blob = (name: string, spec: Record<string, string>): Record<string, unknown> => ({
      apiVersion: 'example.com/v1',
      kind: 'Blob',
      metadata: { name },
      spec,
    });
    const big = await ts.client.post(BLOBS, blob('big', { a: 'x'.repeat(1.6 * 1024 * 1024) }));
    assert.equal(big.status, 413, big.text.slice(0, 300));
    assert.equal(big.body.reason, 'RequestEntityTooLarge');
    assert.match(big.body.message, /1572864 bytes/);
    assert.equal((await ts.client.get(`${BLOBS}/big`)).status, 404);
    const fits = await ts.client.post(BLOBS, blob('grows', { a: 'x'.repeat(1024 * 1024) }));
    assert.equal(fits.status, 201, 'a 1 MiB object is fine');
    const grown = await ts.client.patch(`${BLOBS}/grows`, { spec: { b: 'y'.repeat(700 * 1024) } }, 'merge');
    assert.equal(grown.status, 413, 'a patch may not grow it past the limit');
    const after = await ts.client.get(`${BLOBS}/grows`);
    assert.equal(after.body.metadata.resourceVersion, fits.body.metadata.resourceVersion, 'the stored object is unchanged');
    assert.equal(after.body.spec.b, undefined);
  });

  it('decodes the URL only after authentication: 401 without a token, 400 with one, for a malformed %-escape', async () => {
    const anon = new TestClient(ts.server.url, ts.server.caCert, undefined);
    try {
      for (const path of ['/api/v1/namespaces/%ZZ/configmaps', '/api/v1/namespaces/default/configmaps/%E0%A4%A', '/apis/%/v1']) {
        const r1 = await anon.get(path);
        assert.equal(r1.status, 401, `unauthenticated ${path}`);
        const r2 = await ts.client.get(path);
        assert.equal(r2.status, 400, `authenticated ${path}: ${r2.text.slice(0, 200)}`);
        assert.equal(r2.body.kind, 'Status');
        assert.match(r2.body.message, /malformed/);
      }
    } finally {
      anon.close();
    }
  });

  it('drops a watcher that stops reading once it holds 16 MiB, instead of buffering without bound', async () => {
    // Table rendering makes a fresh string per watcher per event: the case where lines are cheap to count but costly to hold.
    const table = { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io', authorization: `Bearer ${ts.server.token}` };
    const stalled: Array<{ res: IncomingMessage; ended: Promise<string> }> = [];
    const agent = new https.Agent({ ca: ts.server.caCert });
    for (let i = 0; i < 3; i++) {
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = https.request(
          new URL(`${CM}?watch=true&includeObject=Object&labelSelector=stall%3Dyes`, ts.server.url),
          { headers: table, agent },
          resolve,
        );
        req.on('error', reject);
        req.end();
      });
      assert.equal(res.statusCode, 200);
      res.pause(); // stop reading
      const ended = new Promise<string>((resolve) => {
        res.once('close', () => resolve('close'));
        res.once('error', () => resolve('error'));
        res.once('aborted', () => resolve('aborted'));
      });
      stalled.push({ res, ended });
    }
    v8.setFlagsFromString('--expose_gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const heap0 = process.memoryUsage();
    const N = 60;
    const payload = 'z'.repeat(1024 * 1024);
    for (let i = 0; i < N; i++) {
      const r = await ts.client.post(CM, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `stall-${i}`, labels: { stall: 'yes' } },
        data: { p: payload },
      });
      assert.equal(r.status, 201);
    }
    await new Promise((r) => setTimeout(r, 200));
    gc();
    const heap1 = process.memoryUsage();
    // Each watcher was sent ~60 MiB of rendered tables; dropping them at 16 MiB keeps the growth well below 3 × 60 MiB.
    const grewMb =
      (heap1.heapUsed + heap1.external + heap1.arrayBuffers - (heap0.heapUsed + heap0.external + heap0.arrayBuffers)) / 2 ** 20;
    for (const s of stalled) s.res.resume();
    const outcomes = await Promise.all(
      stalled.map((s) => Promise.race([s.ended, new Promise<string>((r) => setTimeout(() => r('still open'), 10_000))])),
    );
    for (const o of outcomes) assert.notEqual(o, 'still open', 'the server dropped the stalled watch');
    agent.destroy();
    assert.ok(grewMb < 150, `server memory stayed bounded while 3 stalled watchers were sent ${N} MiB each: grew ${grewMb.toFixed(0)} MiB`);
    const fresh = await ts.client.watch(`${CM}?watch=true&resourceVersion=0&labelSelector=stall%3Dnone`);
    assert.equal(fresh.status, 200, 'the server still serves watches');
    fresh.stop();
  });
});

describe('apiserver /healthz under hostile YAML', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kars-hostile-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('answers /healthz within 100 ms (median of probes every 50 ms) while three hostile YAML bodies are being sent and refused', async (t) => {
    const p = await startApiserverProcess(dir);
    const client = new TestClient(p.url, p.ca, p.token);
    const probe = new TestClient(p.url, p.ca, undefined);
    try {
      const hostile = [aliasBomb('h1'), deepFlow(1_000_000), deepCompact(1_000_000)];
      let sending = true;
      const refused: number[] = [];
      const senders = hostile.map(async (body) => {
        while (sending) {
          const r = await client.request('POST', CM, body, YAML);
          refused.push(r.status);
        }
      });
      await new Promise((r) => setTimeout(r, 200));
      const lat: number[] = [];
      const t0 = Date.now();
      while (Date.now() - t0 < 4000) {
        const { value: r, ms } = await timed(() => probe.get('/healthz'));
        assert.equal(r.status, 200);
        lat.push(ms);
        await new Promise((r) => setTimeout(r, 50));
      }
      sending = false;
      await Promise.all(senders);
      lat.sort((a, b) => a - b);
      const median = lat[Math.floor(lat.length / 2)] ?? Infinity;
      const max = lat[lat.length - 1] ?? Infinity;
      t.diagnostic(
        `/healthz over ${lat.length} probes: median ${median.toFixed(1)} ms, max ${max.toFixed(0)} ms; ${refused.length} hostile bodies refused`,
      );
      assert.ok(refused.length >= 3, `the hostile bodies kept coming (${refused.length} sent)`);
      assert.ok(
        refused.every((s) => s === 400),
        `every hostile body was refused with 400: ${[...new Set(refused)].join(', ')}`,
      );
      assert.ok(median <= 100, `/healthz median ${median.toFixed(1)} ms over ${lat.length} probes (max ${max.toFixed(0)} ms)`);
      // The bound is on the median: on the shared 2-core machine a single probe can wait on the scheduler or a GC.
      // Before the fix one probe waited 46 s behind the hostile bodies.
      assert.ok(max <= 5000, `/healthz never stalled for 5 s (max ${max.toFixed(0)} ms)`);
    } finally {
      client.close();
      probe.close();
      p.child.kill('SIGKILL');
      await p.exited();
    }
  });
});
