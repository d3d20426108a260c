import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Help } from 'commander';
import { buildProgram, COMMANDS, entryTerm, selectedEntry } from './main.js';

const KARS = fileURLToPath(new URL('../bin/kars.js', import.meta.url));

describe('lazy command registry', () => {
  it('each entry says what its command module defines (name, alias, options, description)', async () => {
    const full = await buildProgram('all');
    assert.deepEqual(
      full.commands.map((c) => c.name()),
      COMMANDS.map((e) => e.name),
    );
    for (const e of COMMANDS) {
      const cmd = await e.load();
      assert.equal(cmd.name(), e.name);
      assert.deepEqual(cmd.aliases(), e.alias ? [e.alias] : [], `${e.name}: aliases`);
      assert.equal(entryTerm(e), new Help().subcommandTerm(cmd), `${e.name}: root help term`);
      assert.equal(cmd.description(), e.description, `${e.name}: description`);
    }
  });

  it('the root help without loading any command equals the help with every command loaded', async () => {
    const lazy = await buildProgram(null);
    const full = await buildProgram('all');
    for (const p of [lazy, full]) p.configureOutput({ getOutHelpWidth: () => 100 });
    assert.equal(lazy.helpInformation(), full.helpInformation());
    assert.ok(
      lazy.commands.every((c) => c.options.length === 0 && c.commands.length === 0),
      'placeholders only',
    );
  });

  it('selects the command an argv runs, and none for help, version or an unknown word', () => {
    const sel = (...a: string[]): string | undefined => selectedEntry(['node', 'kars', ...a])?.name;
    assert.equal(sel('ip', 'list'), 'inferencepolicy');
    assert.equal(sel('inferencepolicy', 'get', 'x'), 'inferencepolicy');
    assert.equal(sel('--no-color', 'ksb', 'list'), 'sandbox');
    assert.equal(sel('help', 'tp'), 'toolpolicy');
    assert.equal(sel('freshness', 'probe', '--help'), 'freshness');
    assert.equal(sel(), undefined);
    assert.equal(sel('--help'), undefined);
    assert.equal(sel('-V'), undefined);
    assert.equal(sel('nope'), undefined);
    assert.equal(sel('help'), undefined);
  });

  it('as a process: root help, a command help, `help CMD`, and an unknown command', () => {
    const run = (...a: string[]): { code: number | null; out: string; err: string } => {
      const r = spawnSync(process.execPath, [KARS, ...a], { encoding: 'utf8', timeout: 60_000 });
      return { code: r.status, out: r.stdout, err: r.stderr };
    };
    const root = run('--help');
    assert.equal(root.code, 0);
    for (const e of COMMANDS) assert.ok(root.out.includes(entryTerm(e)), `root help lists ${entryTerm(e)}`);
    const ip = run('ip', '--help');
    assert.equal(ip.code, 0);
    assert.match(ip.out, /Usage: kars inferencepolicy\|ip \[options\] \[command\]/);
    assert.match(ip.out, /apply \[options\] \[name\]/, 'the loaded command shows its subcommands');
    const help = run('help', 'tp');
    assert.equal(help.code, 0);
    assert.match(help.out, /Usage: kars toolpolicy\|tp/);
    assert.match(help.out, /apply \[options\] \[name\]/);
    const bad = run('ipp', 'list');
    assert.equal(bad.code, 1);
    assert.match(bad.err, /unknown command 'ipp'/);
    assert.match(bad.err, /Did you mean ip\?/);
  });
});
