import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KARS_BIN, REPO_ROOT, runKars } from '../testing/stack.js';

const sh = promisify(execFile);

async function freePorts(n: number): Promise<number[]> {
  const servers: Server[] = [];
  const ports: number[] = [];
  for (let i = 0; i < n; i++) {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    servers.push(s);
    ports.push((s.address() as { port: number }).port);
  }
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/** Whether nothing listens on `port` at 127.0.0.1 now. */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * The same ports, but any another process has taken since they were picked (an ephemeral port of
 * some connection on a busy machine, minutes later) swapped for a fresh free one.
 */
async function reclaimed(ports: number[]): Promise<number[]> {
  const out: number[] = [];
  for (const p of ports) out.push((await isFree(p)) ? p : ((await freePorts(1))[0] ?? p));
  return out;
}

function portFlags(p: number[]): string[] {
  const names = [
    '--apiserver-port',
    '--router-port',
    '--egress-port',
    '--admin-port',
    '--openai-port',
    '--mcp-port',
    '--anthropic-port',
    '--metrics-port',
  ];
  return names.flatMap((n, i) => [n, String(p[i])]);
}

interface Up {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function startUp(dataDir: string, ports: number[]): Up {
  const proc = spawn(process.execPath, [KARS_BIN, 'up', '--data-dir', dataDir, ...portFlags(ports)], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout?.setEncoding('utf8').on('data', (c: string) => (out += c));
  proc.stderr?.setEncoding('utf8').on('data', (c: string) => (err += c));
  return { proc, out: () => out, err: () => err, exited: new Promise((r) => proc.once('exit', (code) => r(code))) };
}

async function waitFor(up: Up, text: string, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!up.out().includes(text)) {
    if (up.proc.exitCode !== null) throw new Error(`kars up exited (${up.proc.exitCode}):\n${up.out()}\n${up.err()}`);
    if (Date.now() - t0 > ms) throw new Error(`no "${text}" within ${ms} ms:\n${up.out()}\n${up.err()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Direct children of a process (Linux /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pasteable lines `kars up` printed (commands only, no comments), in order. */
function printedCommands(out: string): string[] {
  const block = out.slice(out.indexOf('Try it'));
  return block
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^(curl|kubectl|npx kars|export|cd) /.test(l));
}

describe('kars up', { timeout: 600_000 }, () => {
  it('starts the stack, prints commands that work as pasted, stops every child on SIGINT, and resumes with the data kept', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'kars-up-'));
    const ports = await freePorts(8);
    const up = startUp(dataDir, ports);
    try {
      await waitFor(up, 'kars is up', 240_000);
      for (const step of [
        'starting kars apiserver',
        'installing the CRDs',
        'starting the controller',
        'starting the OpenAI, Anthropic and MCP stubs',
        'creating the demo sandbox',
        "starting sandbox demo-agent's router",
        "starting the freshness probe's router",
        'waiting until the router enforces',
      ]) {
        assert.match(up.out(), new RegExp(`${step}.* done \\(\\d+\\.\\d s\\)`), step);
      }
      const lines = printedCommands(up.out());
      const cd = lines.find((l) => l.startsWith('cd '));
      assert.equal(cd, `cd ${REPO_ROOT}`);
      const kubeconfig = /^export KUBECONFIG=(.+)$/m.exec(lines.join('\n'))?.[1] ?? '';
      assert.equal(kubeconfig, join(dataDir, 'apiserver', 'kubeconfig'));
      const run = async (line: string): Promise<string> =>
        (await sh('sh', ['-c', line], { cwd: REPO_ROOT, env: { ...process.env, KUBECONFIG: kubeconfig }, timeout: 120_000 })).stdout;
      const [pass, block, responses, messages, tool, egress, kubectl, wait, status, probe, auditTail, auditVerify, admin] = lines.filter(
        (l) => !/^(cd|export) /.test(l),
      );
      assert.ok(
        pass && block && responses && messages && tool && egress && kubectl && wait && status && probe && auditTail && auditVerify && admin,
        lines.join('\n'),
      );
      assert.match(await run(pass), /"object":"chat.completion"/);
      assert.match(await run(block), /"code":"per_request_tokens_exceeded"/);
      assert.match(await run(responses), /"object":"response".*"status":"completed"/s);
      assert.match(await run(messages), /"type":"message".*Anthropic stub/s);
      assert.match(await run(tool), /"code":"tool_denied".*delete_file/);
      assert.match(await run(egress), /kars egress allow-extra demo-agent --host example\.com:80/);
      assert.match(await run(admin), /"schema_version":1/);
      let hasKubectl = true;
      try {
        await sh('kubectl', ['version', '--client']);
      } catch {
        hasKubectl = false;
      }
      if (hasKubectl) assert.match(await run(kubectl), /karssandbox\.kars\.azure\.com\/demo-agent\s+Running/);
      assert.match(
        await run(wait),
        /demo-budget configured\n.*enforced: generation 2, digest sha256:[0-9a-f]{64}, edit → enforced \d+ ms/s,
      );
      assert.match(await run(pass), /perRequestTokens=100.*"code":"per_request_tokens_exceeded"/, 'request 1 is blocked after the edit');
      assert.match(await run(status), /ip\/demo-budget\s+Enforce\s+demo-agent\s+\S+\s+SYNCED/);
      // Every request above has its decision record, read from the demo router as printed, and the log's chain is whole.
      const tail = await run(auditTail);
      assert.match(tail, /inference\s+ALLOW\s+allowed\s+OpenAI chat completions gpt-4o/);
      assert.match(tail, /inference\s+DENY\s+per_request_tokens_exceeded/);
      assert.match(tail, /tool\s+DENY\s+tool_denied\s+delete_file/);
      assert.match(tail, /egress\s+DENY\s+denied\s+HTTP example\.com:80/);
      assert.match(await run(auditVerify), /^ok: \d+ records in \d+ file\(s\), seq 0\.\.\d+, from the genesis record; no gaps/);
      // The freshness probe works against kars up as printed: kars up runs a router for its sandbox.
      const probed = await run(probe);
      assert.match(probed, /edit→echo\s+\S+/);
      assert.match(probed, /PASS: 20\/20 edits echoed by every router within the SLO/);

      // A second kars up on the same data directory, with its ports moved, refuses (naming the
      // directory, this kars up's PID and --data-dir) and leaves the kubeconfig pointing at this stack.
      const kubeconfigBefore = readFileSync(kubeconfig, 'utf8');
      const second = await runKars(['up', '--data-dir', dataDir, ...portFlags(await freePorts(8))]);
      assert.equal(second.code, 1, second.stdout);
      assert.equal(
        second.stderr,
        `error: data directory ${dataDir} is in use by kars up (PID ${up.proc.pid ?? 0}, since ${/since (\S+)\)/.exec(second.stderr)?.[1] ?? '?'}); kars up does not share a data directory: stop that process, or pass --data-dir DIR to use another directory\n`,
      );
      assert.equal(readFileSync(kubeconfig, 'utf8'), kubeconfigBefore, 'the refused kars up did not rewrite the kubeconfig');
      assert.match(await run(pass), /per_request_tokens_exceeded/, 'the first stack still serves');

      // SIGINT to kars up alone: it stops every child, then exits 0.
      const kids = childrenOf(up.proc.pid ?? 0);
      assert.equal(kids.length, 7, `apiserver, controller, three stubs, the demo router and the probe's router: ${kids.join(' ')}`);
      up.proc.kill('SIGINT');
      assert.equal(await up.exited, 0, up.err());
      assert.deepEqual(kids.filter(alive), [], 'no orphans');
      assert.match(up.out(), /kars up: stopped \(data kept in /);

      // A port in use is a clear error naming it and the flag.
      const holder = createServer();
      await new Promise<void>((r) => holder.listen(ports[1], '127.0.0.1', r));
      const busy = await runKars(['up', '--data-dir', dataDir, ...portFlags(ports)]);
      holder.close();
      assert.equal(busy.code, 1);
      assert.equal(
        busy.stderr,
        `error: port ${ports[1] ?? 0} (the demo router) is already in use on 127.0.0.1: stop what holds it (a kars up already running?) or pass --router-port PORT\n`,
      );

      // Resume: the data (and the stricter edit) is kept.
      const again = startUp(dataDir, await reclaimed(ports));
      try {
        await waitFor(again, 'kars is up', 240_000);
        assert.match(again.out(), /\(resuming: kept from the last run\)/);
        assert.match(again.out(), /kept what exists \(created: nothing\)/);
        const got = await runKars(['ip', 'get', 'demo-budget', '-o', 'json', '--kubeconfig', kubeconfig]);
        assert.equal(JSON.parse(got.stdout).spec.tokenBudget.perRequestTokens, 100);
        const kids2 = childrenOf(again.proc.pid ?? 0);
        again.proc.kill('SIGTERM');
        assert.equal(await again.exited, 0, again.err());
        assert.deepEqual(kids2.filter(alive), []);
      } finally {
        if (again.proc.exitCode === null) again.proc.kill('SIGKILL');
      }
    } finally {
      if (up.proc.exitCode === null) {
        for (const k of childrenOf(up.proc.pid ?? 0)) process.kill(k, 'SIGKILL');
        up.proc.kill('SIGKILL');
      }
      if (existsSync(dataDir)) rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
