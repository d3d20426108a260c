// `kars controller` as a process: /healthz on the pod address fails when its event loop is wedged.
// The stall is injected from outside (a --import preload that busy-waits), not by a hook in the code.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const KARS = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../bin/kars.js');

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

async function get(url: string): Promise<{ status: number; text: string } | undefined> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return { status: r.status, text: await r.text() };
  } catch {
    return undefined;
  }
}

void describe('kars controller liveness (process)', () => {
  let dir: string;
  let child: ChildProcess | undefined;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kars-ctl-'));
  });
  after(() => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers /healthz 200, then 503 naming the event loop while it is wedged, then 200 again', async () => {
    const port = await freePort();
    const apiPort = await freePort(); // nothing listens: the controller keeps retrying, health still answers
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:${apiPort}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n`,
    );
    const stall = join(dir, 'stall.mjs');
    const flag = join(dir, 'stall-now');
    // Busy-wait 3 s once the test creates the flag file: a wedged loop, as a stuck synchronous task would be.
    writeFileSync(
      stall,
      `import { existsSync } from 'node:fs';\nconst t = setInterval(() => { if (existsSync(${JSON.stringify(flag)})) { clearInterval(t); const end = Date.now() + 3000; while (Date.now() < end) {} } }, 100);\nt.unref();\n`,
    );
    child = spawn(process.execPath, ['--import', stall, KARS, 'controller', '--kubeconfig', kubeconfig, '--liveness-max-loop-delay', '1'], {
      env: { ...process.env, LEADER_ELECTION_ENABLED: 'false', CONTROLLER_METRICS_ADDR: `127.0.0.1:${port}` },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    const url = `http://127.0.0.1:${port}/healthz`;
    const deadline = Date.now() + 30_000;
    let first: { status: number; text: string } | undefined;
    while (Date.now() < deadline && !(first = await get(url))) await new Promise((r) => setTimeout(r, 100));
    assert.equal(first?.status, 200, `healthz never answered; stderr: ${stderr.slice(-2000)}`);
    writeFileSync(flag, '');
    let failed: { status: number; text: string } | undefined;
    const until = Date.now() + 20_000;
    while (Date.now() < until) {
      const r = await get(url);
      if (r?.status === 503) {
        failed = r;
        break;
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(failed, 'healthz never failed while the loop was wedged');
    assert.match(failed.text, /\[-\]event-loop: event loop (stalled|blocked)/);
    let recovered = false;
    const until2 = Date.now() + 30_000;
    while (Date.now() < until2 && !recovered) {
      recovered = (await get(url))?.status === 200;
      if (!recovered) await new Promise((res) => setTimeout(res, 250));
    }
    assert.ok(recovered, 'healthz did not recover after the stall');
  });
});
