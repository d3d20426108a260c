/**
 * The `kars` binary of this checkout run as a process, as a user runs it, and the two requests CLI
 * tests make to a router. Shared by the kars apiserver stack (stack.ts) and the kube-apiserver suites.
 */
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (for examples/ and the bin). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
export const KARS_BIN = join(REPO_ROOT, 'apps/cli/bin/kars.js');

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `kars <args>` as a process; `env` is added to a copy of this process's env (KUBECONFIG removed unless given). */
export function runKars(
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; input?: string } = {},
): Promise<RunResult> {
  const env: Record<string, string | undefined> = { ...process.env, KUBECONFIG: undefined, ...opts.env };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [KARS_BIN, ...args], {
      cwd: opts.cwd ?? REPO_ROOT,
      env: env as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** POST a chat completion asking for `maxTokens` to a router. */
export async function chat(routerUrl: string, maxTokens: number): Promise<{ status: number; body: any }> {
  const res = await fetch(`${routerUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', max_tokens: maxTokens, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

/** Call a tool through a router's MCP gateway; returns the JSON-RPC response. */
export async function callTool(routerUrl: string, tool: string): Promise<any> {
  const res = await fetch(`${routerUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool, arguments: { path: '/tmp/x' } } }),
  });
  return (await res.json()) as unknown;
}
