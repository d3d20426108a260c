import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Command } from 'commander';
import { crdYaml } from '@kars/policy-api';
import { crdsCommand } from './crds.js';

function program(sink: { text: string }): Command {
  return new Command('kars')
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} })
    .addCommand(crdsCommand({ write: (s: string) => (sink.text += s) }).exitOverride());
}

describe('kars crds', () => {
  it('prints exactly the generated multi-document CRD YAML', async () => {
    const sink = { text: '' };
    await program(sink).parseAsync(['node', 'kars', 'crds']);
    assert.equal(sink.text, crdYaml());
    assert.equal(sink.text.split(/^---$/m).length, 4);
    assert.match(sink.text, /name: karssandboxes\.kars\.azure\.com/);
  });

  it('rejects unexpected arguments instead of ignoring them', async () => {
    const sink = { text: '' };
    await assert.rejects(program(sink).parseAsync(['node', 'kars', 'crds', 'extra']), /too many arguments|excess/i);
    assert.equal(sink.text, '');
  });
});
