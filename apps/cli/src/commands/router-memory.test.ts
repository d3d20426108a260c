/**
 * Issue 9 item 6 (router side): 40 clients sending 9 MiB bodies at once must not balloon a real
 * `kars router` process (the hole: it grew to 1.2 GiB). The router runs as a child process on a
 * policy directory; its peak RSS (VmHWM from /proc/<pid>/status) is asserted under a stated bound.
 *
 * Bound: 400 MiB peak RSS with the default caps (32 MiB of request bodies in flight, 256 requests).
 * Measured on the 2-core dev VM: see the diagnostic line (about 200–260 MiB).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOpenAIStub } from '@kars/router/stubs';
import { withRouterNodeOptions } from '@kars/router/process-options';

const kars = fileURLToPath(new URL('../../bin/kars.js', import.meta.url));
const MIB = 1024 * 1024;
/** The stated bound on the router's peak RSS during the storm. */
const RSS_BOUND_MIB = 400;

function vmHwmMib(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function post(url: URL, body: Buffer): Promise<{ status: number; code?: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let code: string | undefined;
          try {
            code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } }).error?.code;
          } catch {
            code = undefined;
          }
          resolve(code === undefined ? { status: res.statusCode ?? 0 } : { status: res.statusCode ?? 0, code });
        });
        res.on('error', (e) => resolve({ error: e.message }));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end(body);
  });
}

describe(
  'kars router memory under 40 × 9 MiB bodies (process)',
  { skip: !existsSync('/proc/self/status') ? 'needs /proc' : false, timeout: 120_000 },
  () => {
    it(`keeps its peak RSS under ${RSS_BOUND_MIB} MiB, serving what fits and refusing the rest with 503 router_busy (hole: 40 × 9 MiB grew the router to 1.2 GiB)`, async (t) => {
      const stub = await startOpenAIStub();
      const dir = mkdtempSync(join(tmpdir(), 'kars-mem-'));
      mkdirSync(join(dir, 'inference'));
      writeFileSync(
        join(dir, 'inference', 'inference-policy.json'),
        JSON.stringify({
          appliesTo: { sandboxName: 'sb', sandboxMatchLabels: {}, action: null },
          tokenBudget: null,
          contentSafety: null,
          modelPreference: null,
          provider: null,
          guardrails: null,
          displayName: null,
        }),
      );
      const child = spawn(
        process.execPath,
        [kars, 'router', '--sandbox', 'sb', '--policy-dir', dir, '--upstream', stub.url.href, '--listen', '127.0.0.1:0'],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
          // The node options of the router's container (ADR 0059): the bound holds with them.
          env: { ...process.env, NODE_OPTIONS: withRouterNodeOptions(process.env['NODE_OPTIONS']), KUBECONFIG: join(dir, 'none') },
        },
      );
      child.stderr.resume();
      try {
        const url = await new Promise<URL>((resolve, reject) => {
          let out = '';
          child.stdout.on('data', (c: Buffer) => {
            out += c.toString();
            const m = /listening: (\S+)/.exec(out);
            if (m?.[1]) resolve(new URL(m[1]));
          });
          child.once('exit', (code) => reject(new Error(`router exited ${code}`)));
        });
        // Wait for the policy to load (503 policy_not_loaded before).
        for (let i = 0; i < 100; i++) {
          const r = await post(url, Buffer.from('{"model":"m","messages":[]}'));
          if ('status' in r && r.status === 200) break;
          await new Promise((res) => setTimeout(res, 50));
        }
        const pad = 9 * MIB - 64;
        const body = Buffer.concat([
          Buffer.from('{"model":"m","messages":[{"role":"user","content":"'),
          Buffer.alloc(pad, 0x61),
          Buffer.from('"}]}'),
        ]);
        const before = vmHwmMib(child.pid!);
        const results = await Promise.all(Array.from({ length: 40 }, () => post(url, body)));
        const peak = vmHwmMib(child.pid!);
        const served = results.filter((r) => 'status' in r && r.status === 200).length;
        const busy = results.filter((r) => 'status' in r && r.status === 503 && r.code === 'router_busy').length;
        const reset = results.filter((r) => 'error' in r).length;
        t.diagnostic(
          `router peak RSS ${peak.toFixed(0)} MiB (before the storm ${before.toFixed(0)} MiB); 40 × 9 MiB: ${served} served, ${busy} × 503 router_busy, ${reset} reset while still sending`,
        );
        assert.equal(
          served + busy + reset,
          40,
          `unexpected answers: ${JSON.stringify(results.filter((r) => !('status' in r) || (r.status !== 200 && r.status !== 503)))}`,
        );
        assert.ok(served >= 1, 'some requests were served');
        assert.ok(peak < RSS_BOUND_MIB, `peak RSS ${peak.toFixed(0)} MiB ≥ ${RSS_BOUND_MIB} MiB`);
        // The router is still healthy and serves a normal request afterwards.
        const after = await post(url, Buffer.from('{"model":"m","messages":[]}'));
        assert.deepEqual(after, { status: 200 });
      } finally {
        child.kill('SIGKILL');
        await stub.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
);
