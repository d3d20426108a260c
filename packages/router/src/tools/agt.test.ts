import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { evaluateAgt, globMatch, parseAgtProfile } from './agt.js';

function parsed(text: string) {
  const r = parseAgtProfile(text);
  if (!r.ok) throw new Error(`expected a profile, got error: ${r.error}`);
  return r;
}

function refused(text: string): string {
  const r = parseAgtProfile(text);
  if (r.ok) throw new Error('expected a parse error');
  return r.error;
}

describe('parseAgtProfile', () => {
  it('reads allow and deny rules in order, with reasons, and the default', () => {
    const r = parsed('default: deny\nrules:\n  - allow: "github/get_*"\n  - deny: "*delete*"\n    reason: no deleting\n');
    assert.deepEqual(r.agt, {
      defaultEffect: 'deny',
      rules: [
        { effect: 'allow', pattern: 'github/get_*' },
        { effect: 'deny', pattern: '*delete*', reason: 'no deleting' },
      ],
    });
    assert.deepEqual(r.warnings, []);
  });

  it('defaults to allow when "default" is absent or null', () => {
    assert.equal(parsed('rules: []\n').agt.defaultEffect, 'allow');
    assert.equal(parsed('default:\nrules: []\n').agt.defaultEffect, 'allow');
  });

  it('treats an empty document as no rules and default allow, with a warning', () => {
    const r = parsed('');
    assert.deepEqual(r.agt, { rules: [], defaultEffect: 'allow' });
    assert.equal(r.warnings.length, 1);
  });

  it('ignores unknown top-level keys but reports each as a warning', () => {
    const r = parsed('version: 1\nname: x\nrules:\n  - deny: rm\n');
    assert.deepEqual(r.agt.rules, [{ effect: 'deny', pattern: 'rm' }]);
    assert.equal(r.warnings.length, 2);
    assert.match(r.warnings[0]!, /"version"/);
    assert.match(r.warnings[1]!, /"name"/);
  });

  it('refuses malformed YAML', () => {
    assert.match(refused('rules: [\n'), /not valid YAML/);
  });

  it('refuses duplicate keys and several documents', () => {
    assert.match(refused('default: allow\ndefault: deny\n'), /not valid YAML/);
    assert.match(refused('default: allow\n---\ndefault: deny\n'), /not valid YAML/);
  });

  it('refuses a top level that is not a mapping', () => {
    assert.match(refused('- deny: x\n'), /must be a mapping/);
    assert.match(refused('just text\n'), /must be a mapping/);
  });

  it('refuses a default other than allow or deny (YAML 1.2 reads "no" as a string)', () => {
    assert.match(refused('default: no\n'), /default must be "allow" or "deny"/);
    assert.match(refused('default: Deny\n'), /default must be/);
  });

  it('refuses rules that are not a list', () => {
    assert.match(refused('rules: {deny: x}\n'), /rules must be a list/);
  });

  it('refuses a rule with both or neither of allow and deny', () => {
    assert.match(refused('rules:\n  - allow: a\n    deny: b\n'), /rules\[0\] must have exactly one/);
    assert.match(refused('rules:\n  - reason: x\n'), /rules\[0\] must have exactly one/);
  });

  it('refuses a rule with an unknown key, naming the rule', () => {
    assert.match(refused('rules:\n  - allow: a\n  - deny: b\n    when: weekend\n'), /rules\[1\] has unknown key "when"/);
  });

  it('refuses a non-string or empty pattern and a non-string reason', () => {
    assert.match(refused('rules:\n  - deny: 42\n'), /rules\[0\]\.deny must be a non-empty glob string/);
    assert.match(refused('rules:\n  - deny: ""\n'), /non-empty/);
    assert.match(refused('rules:\n  - deny: x\n    reason: [a]\n'), /rules\[0\]\.reason must be a string/);
  });
});

describe('globMatch', () => {
  it('matches literals exactly, ignoring case (issue 9 item 4: a re-cased name cannot escape a deny)', () => {
    assert.equal(globMatch('read_file', 'read_file'), true);
    assert.equal(globMatch('read_file', 'Read_FILE'), true);
    assert.equal(globMatch('READ_*', 'read_file'), true);
    assert.equal(globMatch('read', 'read_file'), false);
  });

  it('lets * match any run, also empty, and ? exactly one character', () => {
    assert.equal(globMatch('*', 'anything'), true);
    assert.equal(globMatch('*', ''), true);
    assert.equal(globMatch('read_*', 'read_'), true);
    assert.equal(globMatch('*delete*', 'bulk_delete_rows'), true);
    assert.equal(globMatch('a*b*c', 'aXbYbZc'), true);
    assert.equal(globMatch('a*b*c', 'aXbYbZ'), false);
    assert.equal(globMatch('get_?', 'get_x'), true);
    assert.equal(globMatch('get_?', 'get_'), false);
    assert.equal(globMatch('get_?', 'get_xy'), false);
  });

  it('lets * and ? match a slash, so *delete* matches the namespaced github/delete_repo (issue 9 item 4)', () => {
    assert.equal(globMatch('*delete*', 'github/delete_repo'), true);
    assert.equal(globMatch('*', 'github/create_issue'), true);
    assert.equal(globMatch('github/*', 'github/create_issue'), true);
    assert.equal(globMatch('*/create_issue', 'github/create_issue'), true);
    assert.equal(globMatch('git?ub/*', 'git/b/x'), false);
    assert.equal(globMatch('git?ub', 'git/ub'), true);
    assert.equal(globMatch('github/*', 'github/a/b'), true);
    assert.equal(globMatch('github/*', 'gitlab/a'), false);
  });

  it('treats characters other than * and ? literally', () => {
    assert.equal(globMatch('a.b', 'aXb'), false);
    assert.equal(globMatch('[ab]', 'a'), false);
    assert.equal(globMatch('[ab]', '[ab]'), true);
  });

  it('stays fast on patterns that make naive backtracking explode', () => {
    const text = 'a'.repeat(5000);
    const started = performance.now();
    assert.equal(globMatch('*a*a*a*a*a*a*a*a*b', text), false);
    assert.ok(performance.now() - started < 500);
  });
});

describe('evaluateAgt', () => {
  const agt = parsed('default: deny\nrules:\n  - deny: "fs/rm"\n    reason: no rm on fs\n  - allow: "rm"\n  - allow: "fs/*"\n').agt;

  it('lets the first matching rule win', () => {
    assert.equal(evaluateAgt(agt, 'fs', 'rm').effect, 'deny');
    assert.equal(evaluateAgt(agt, 'fs', 'rm').index, 0);
    assert.equal(evaluateAgt(agt, 'other', 'rm').effect, 'allow');
  });

  it('matches server/tool patterns only when the server is known', () => {
    assert.equal(evaluateAgt(agt, 'fs', 'ls').effect, 'allow');
    assert.deepEqual(evaluateAgt(agt, undefined, 'ls'), { effect: 'deny' });
  });

  it('falls back to the default when no rule matches', () => {
    assert.deepEqual(evaluateAgt(agt, 'web', 'fetch'), { effect: 'deny' });
    assert.deepEqual(evaluateAgt({ rules: [], defaultEffect: 'allow' }, 'web', 'fetch'), { effect: 'allow' });
  });
});
