import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ToolRules } from '../snapshot.js';
import { selectToolPolicy } from './select.js';
import { toolRules } from '../testing/rules.js';

function p(name: string, tool: string | null, mcpServer: string | null): ToolRules {
  return toolRules(name, { appliesTo: { tool, mcpServer } });
}

describe('selectToolPolicy', () => {
  const all = [p('any', null, null), p('star', '*', null), p('server', null, 'fs'), p('tool', 'rm', null), p('both', 'rm', 'fs')];

  it('prefers tool exact and server exact over everything', () => {
    assert.equal(selectToolPolicy(all, 'fs', 'rm')?.name, 'both');
  });

  it('prefers tool exact over server exact', () => {
    assert.equal(selectToolPolicy(all, 'web', 'rm')?.name, 'tool');
    assert.equal(
      selectToolPolicy(
        all.filter((x) => x.name !== 'both'),
        'fs',
        'rm',
      )?.name,
      'tool',
    );
  });

  it('prefers server exact over wildcards', () => {
    assert.equal(selectToolPolicy(all, 'fs', 'ls')?.name, 'server');
  });

  it('falls back to wildcards, the first in the list on a tie', () => {
    assert.equal(selectToolPolicy(all, 'web', 'ls')?.name, 'any');
    assert.equal(selectToolPolicy([all[1]!, all[0]!], 'web', 'ls')?.name, 'star');
  });

  it('breaks ties between equally specific policies by list order', () => {
    assert.equal(selectToolPolicy([p('first', 'rm', null), p('second', 'rm', null)], undefined, 'rm')?.name, 'first');
  });

  it('never applies a policy for another tool or another server', () => {
    assert.equal(selectToolPolicy([p('tool', 'rm', null), p('server', null, 'fs')], 'web', 'ls'), undefined);
  });

  it('does not apply a server-scoped policy when the server is unknown', () => {
    assert.equal(selectToolPolicy([p('both', 'rm', 'fs')], undefined, 'rm'), undefined);
    assert.equal(selectToolPolicy([p('both', 'rm', 'fs'), p('any', null, null)], undefined, 'rm')?.name, 'any');
  });

  it('returns undefined for an empty list', () => {
    assert.equal(selectToolPolicy([], 'fs', 'rm'), undefined);
  });
});
