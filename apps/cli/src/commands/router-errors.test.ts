import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, request } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { buildProgram } from '../main.js';
import { callTool, REPO_ROOT, runKars, startTestStack, until } from '../testing/stack.js';
import type { TestStack } from '../testing/stack.js';

/** Split a command line the way sh does for the quoting the router uses ("…" and '…'; no escapes inside '…'). */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let cur = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] ?? '';
    if (ch === '"' || ch === "'") {
      const end = line.indexOf(ch, i + 1);
      assert.ok(end > i, `unterminated quote in ${line}`);
      cur += line.slice(i + 1, end);
      inWord = true;
      i = end;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(cur);
  return words;
}

/** The `kars …` command a router message names: from "kars " to the end of the message. */
function commandIn(message: string): string[] {
  const m = /(?:^|[\s:])(kars (?:egress|toolpolicy|tp|inferencepolicy|ip|sandbox|policy) .*)$/.exec(message);
  assert.ok(m?.[1], `no kars command in: ${message}`);
  const words = shellWords(m[1]);
  assert.equal(words[0], 'kars');
  return words.slice(1);
}

/** Every `kars <command> <subcommand>` spelled inside a string literal in the router's sources (its messages), de-duplicated. */
function commandsNamedInRouterSources(): string[][] {
  const found = new Map<string, string[]>();
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) {
        for (const m of readFileSync(p, 'utf8').matchAll(/[`'"][^`'"\n]*\bkars ([a-z][a-z-]*) ([a-z][a-z-]*)/g))
          found.set(`${m[1]} ${m[2]}`, [m[1] ?? '', m[2] ?? '']);
      }
    }
  };
  walk(join(REPO_ROOT, 'packages/router/src'));
  return [...found.values()];
}

describe("every command the router's errors name exists and works exactly as printed", () => {
  let stack: TestStack;
  let env: Record<string, string>;
  let target: Server;
  let targetPort: number;

  before(async () => {
    stack = await startTestStack();
    env = { KUBECONFIG: stack.kubeconfig };
    target = createServer((_req, res) => res.end('hello from the target'));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    targetPort = (target.address() as AddressInfo).port;
    // The target is on loopback: an approval may open it only because the baseline lists that address
    // (issue 9 item 5), so the demo sandbox gets 127.0.0.1 (another port) in its baseline here.
    const sandboxFile = join(mkdtempSync(join(tmpdir(), 'kars-rerr-')), 'sandbox.yaml');
    writeFileSync(
      sandboxFile,
      `${readFileSync(join(REPO_ROOT, 'examples/sandbox.yaml'), 'utf8').trimEnd()}\n      - {host: 127.0.0.1, port: 1}\n`,
    );
    for (const args of [
      ['sandbox', 'create', '-f', sandboxFile],
      ['ip', 'apply', '-f', 'examples/inference-policy.yaml'],
      ['tp', 'apply', '-f', 'examples/tool-policy-approval.yaml'],
    ]) {
      const r = await runKars(args, { env });
      assert.equal(r.code, 0, r.stderr);
    }
  });
  after(async () => {
    await stack.close();
    await new Promise((r) => target.close(r));
  });

  it('each `kars <group> <command>` in the router sources is a real CLI command', async () => {
    const program = await buildProgram();
    const named = commandsNamedInRouterSources();
    const groups = new Set(program.commands.filter((c) => c.commands.length > 0).flatMap((c) => [c.name(), ...c.aliases()]));
    const checked = named.filter(([g]) => groups.has(g ?? ''));
    assert.ok(checked.length >= 2, `expected the egress and toolpolicy commands at least, found ${JSON.stringify(named)}`);
    for (const [g, sub] of checked) {
      const group = program.commands.find((c) => c.name() === g || c.aliases().includes(g ?? ''));
      assert.ok(
        group?.commands.some((c) => c.name() === sub || c.aliases().includes(sub ?? '')),
        `router names "kars ${g ?? ''} ${sub ?? ''}", which the CLI does not have`,
      );
    }
  });

  it('the egress 403 names `kars egress allow-extra …`; run as printed, it lets the request through', async () => {
    const router = await stack.router('demo-agent');
    const proxy = new URL(router.egressUrl ?? '');
    const viaProxy = async (): Promise<{ status: number; text: string }> => {
      // An absolute-URI request to the forward proxy, as curl -x sends it.
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        const r = request(
          {
            host: proxy.hostname,
            port: proxy.port,
            method: 'GET',
            path: `http://127.0.0.1:${targetPort}/`,
            headers: { host: `127.0.0.1:${targetPort}` },
          },
          resolve,
        );
        r.on('error', reject);
        r.end();
      });
      let text = '';
      for await (const c of res) text += String(c);
      return { status: res.statusCode ?? 0, text };
    };
    const denied = await until('router enforcing', async () => {
      const r = await viaProxy();
      return r.status === 403 ? r : undefined;
    });
    const message = (JSON.parse(denied.text) as { error: string }).error;
    const args = commandIn(message);
    assert.deepEqual(args.slice(0, 5), ['egress', 'allow-extra', 'demo-agent', '--host', `127.0.0.1:${targetPort}`]);
    const run = await runKars(args, { env });
    assert.equal(run.code, 0, `${args.join(' ')}\n${run.stderr}`);
    assert.match(run.stdout, /^egressapproval\.kars\.azure\.com\/demo-agent-extra-\d{8}-\d{6}z created\n$/);
    const allowed = await until('allowed after the approval', async () => {
      const r = await viaProxy();
      return r.status === 200 ? r : undefined;
    });
    assert.equal(allowed.text, 'hello from the target');
  });

  it('approval_required names `kars toolpolicy apply … --approval-mode never`; run as printed, the tool call goes through', async () => {
    const router = await stack.router('demo-agent');
    const refused = await until('approval_required', async () => {
      const r = await callTool(router.url, 'echo');
      return r.error?.data?.code === 'approval_required' ? r : undefined;
    });
    const args = commandIn(refused.error.data.howToGetApproval as string);
    assert.deepEqual(args, ['toolpolicy', 'apply', 'demo-tools', '--approval-mode', 'never']);
    const run = await runKars(args, { env });
    assert.equal(run.code, 0, `${args.join(' ')}\n${run.stderr}`);
    assert.equal(run.stdout, 'toolpolicy.kars.azure.com/demo-tools configured\n');
    const ok = await until('tool call allowed', async () => {
      const r = await callTool(router.url, 'echo');
      return r.result ? r : undefined;
    });
    assert.match(JSON.stringify(ok.result), /called echo/);
    // The edit changed only the approval mode: the AGT profile still denies *delete*.
    const denied = await callTool(router.url, 'delete_file');
    assert.equal(denied.error?.data?.code, 'tool_denied');
  });
});
