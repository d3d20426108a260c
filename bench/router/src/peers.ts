/** Peers from outside the repo: nginx (Debian package) and the Portkey AI gateway (npm, scratch dir). */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { ROOT, freePort, sleep, stopChild, type Exit } from '../../lib/dist/index.js';

/** Where the Portkey gateway is installed for the benchmark (a git-ignored scratch folder, not a repo dependency). */
export const PORTKEY_DIR = process.env.BENCH_PORTKEY_DIR ?? join(ROOT, 'bench', 'peers', 'node_modules', '@portkey-ai', 'gateway');

/** nginx on PATH, or undefined (`nginx -v` prints `nginx version: nginx/1.22.1` on stderr). */
export function findNginx(): { version: string } | undefined {
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  if (r.error) return undefined;
  return { version: `${r.stdout}${r.stderr}`.match(/nginx\/(\S+)/)?.[1] ?? '?' };
}

/** The Portkey gateway's start script and version, or undefined. */
export function findPortkey(): { script: string; version: string } | undefined {
  const script = join(PORTKEY_DIR, 'build', 'start-server.js');
  if (!existsSync(script)) return undefined;
  const { version } = JSON.parse(readFileSync(join(PORTKEY_DIR, 'package.json'), 'utf8')) as { version: string };
  return { script, version };
}

/** The headers that make the Portkey gateway forward to the stub (an OpenAI-compatible custom host, or the Anthropic stub as provider anthropic). */
export function portkeyHeaders(stubUrl: string, provider = 'openai'): Record<string, string> {
  return { 'x-portkey-provider': provider, 'x-portkey-custom-host': `${stubUrl}/v1` };
}

/** Resolve once `url` answers GET / (any status), or throw after `timeoutMs`. */
async function waitForHttp(url: string, timeoutMs: number, child: ChildProcess): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`exited (code ${child.exitCode}) before answering ${url}`);
    const ok = await fetch(url).then(
      (r) => r.arrayBuffer().then(() => true),
      () => false,
    );
    if (ok) return;
    if (performance.now() - t0 > timeoutMs) throw new Error(`no answer from ${url} within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** A peer process from outside the repo, wrapped as the same handle `startChild` returns (pid, url, died, stderr, stop). */
export interface External {
  label: string;
  child: ChildProcess;
  pid: number;
  url: string;
  stderr: { tail: string[]; error: number; firstErrors: string[] };
  died: string | undefined;
  stop(): Promise<void>;
}

/** Wrap a spawned child as the same handle `startChild` returns (pid, url, died, stderr, stop). */
function externalHandle(label: string, child: ChildProcess, url: string): External {
  const tail: string[] = [];
  const stderr = { tail, error: 0, firstErrors: [] };
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c: string) => {
    tail.push(...c.split('\n').filter(Boolean));
    if (tail.length > 50) tail.splice(0, tail.length - 50);
  });
  child.stdout?.resume();
  const exited = new Promise<Exit>((res) => child.once('exit', (code, signal) => res({ code, signal })));
  let stopping = false;
  const h: External = {
    label,
    child,
    pid: child.pid ?? 0,
    url,
    stderr,
    died: undefined,
    async stop() {
      stopping = true;
      await stopChild(child, exited, 5000);
    },
  };
  void exited.then(({ code, signal }) => {
    if (!stopping) h.died = `${label} exited unexpectedly (code ${code}, signal ${signal})\n${tail.slice(-10).join('\n')}`;
  });
  return h;
}

/**
 * nginx as a plain reverse proxy to the stub, as the issue measured it: one process doing the
 * work (`master_process off`, one worker's worth, like the single-threaded Node peers), upstream
 * keep-alive (`keepalive 64`, HTTP/1.1, `Connection: ""`), no access log, and `proxy_buffering
 * off` so streams are passed on as they arrive.
 */
export async function startNginx(tmp: string, stubUrl: string, anthropicUrl: string | undefined): Promise<External> {
  const dir = join(tmp, 'nginx');
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const port = await freePort();
  const up = new URL(stubUrl);
  const anthropicUp = anthropicUrl ? new URL(anthropicUrl) : undefined;
  const pass = 'proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off;';
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    [
      'daemon off;',
      'master_process off;',
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'logs', 'error.log')} warn;`,
      'events { worker_connections 4096; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${join(dir, 'body')};`,
      `  proxy_temp_path ${join(dir, 'proxy')};`,
      `  fastcgi_temp_path ${join(dir, 'fastcgi')};`,
      `  uwsgi_temp_path ${join(dir, 'uwsgi')};`,
      `  scgi_temp_path ${join(dir, 'scgi')};`,
      '  keepalive_requests 1000000;',
      `  upstream stub { server ${up.host}; keepalive 64; }`,
      ...(anthropicUp ? [`  upstream anthropic { server ${anthropicUp.host}; keepalive 64; }`] : []),
      `  server { listen 127.0.0.1:${port};`,
      `    location / { proxy_pass http://stub; ${pass} }`,
      ...(anthropicUp ? [`    location /v1/messages { proxy_pass http://anthropic; ${pass} }`] : []),
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  const child = spawn('nginx', ['-p', dir, '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = `http://127.0.0.1:${port}`;
  const h = externalHandle('nginx', child, url);
  await waitForHttp(url, 10_000, child);
  return h;
}

/** The Portkey AI gateway (`start-server.js --port=N --headless`, NODE_ENV=production: no UI, no log stream). */
export async function startPortkey(script: string): Promise<External> {
  const port = await freePort();
  const child = spawn(process.execPath, [script, `--port=${port}`, '--headless'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_ENV: 'production' },
  });
  const url = `http://127.0.0.1:${port}`;
  const h = externalHandle('portkey', child, url);
  await waitForHttp(url, 30_000, child);
  return h;
}
