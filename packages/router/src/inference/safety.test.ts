import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { evaluateSafety, extractAnnotations, isFloorActive, severityRank } from './safety.js';
import { safetyRules as cs } from '../testing/rules.js';

const sev = (severities: Record<string, string>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(severities).map(([k, v]) => [k, { filtered: false, severity: v }]));

describe('severityRank', () => {
  it('ranks Safe < Low < Medium < High, case-insensitively, and leaves anything else unknown', () => {
    assert.deepEqual(['safe', 'LOW', 'Medium', 'hIgH'].map(severityRank), [0, 1, 2, 3]);
    assert.equal(severityRank('extreme'), undefined);
    assert.equal(severityRank(3), undefined);
    assert.equal(severityRank(undefined), undefined);
  });
});

describe('isFloorActive', () => {
  it('is inactive with no rules, no ceilings and Prompt Shields not required', () => {
    assert.equal(isFloorActive(null), false);
    assert.equal(isFloorActive(undefined), false);
    assert.equal(isFloorActive(cs({})), false);
    assert.equal(isFloorActive(cs({ requirePromptShields: false })), false);
  });
  it('is active with any ceiling or with Prompt Shields required', () => {
    assert.equal(isFloorActive(cs({ violence: 'High' })), true);
    assert.equal(isFloorActive(cs({ requirePromptShields: true })), true);
  });
});

describe('evaluateSafety', () => {
  it('blocks a severity strictly above its ceiling and passes one equal to it', () => {
    const rules = cs({ hate: 'Medium' });
    assert.deepEqual(evaluateSafety(rules, [sev({ hate: 'medium' })]), { blocked: false });
    assert.deepEqual(evaluateSafety(rules, [sev({ hate: 'high' })]), {
      blocked: true,
      code: 'inference_policy_content_safety_exceeded',
      category: 'hate',
      message: 'Response blocked: hate severity High exceeds InferencePolicy ceiling Medium',
    });
  });

  it('reads observed severities case-insensitively and ignores unknown ones', () => {
    const rules = cs({ sexual: 'Low' });
    assert.equal(evaluateSafety(rules, [sev({ sexual: 'MEDIUM' })]).blocked, true);
    assert.equal(evaluateSafety(rules, [sev({ sexual: 'catastrophic' })]).blocked, false);
    assert.equal(evaluateSafety(rules, [{ sexual: { filtered: true } }]).blocked, false);
  });

  it('checks hate, self_harm, sexual, violence in that order whatever order the annotation lists them', () => {
    const rules = cs({ hate: 'Safe', selfHarm: 'Safe', sexual: 'Safe', violence: 'Safe' });
    const v = evaluateSafety(rules, [sev({ violence: 'high', sexual: 'high', self_harm: 'low' })]);
    assert.equal(v.blocked && 'category' in v ? v.category : undefined, 'self_harm');
    assert.equal(v.blocked ? v.message : '', 'Response blocked: self_harm severity Low exceeds InferencePolicy ceiling Safe');
  });

  it('looks at every annotation block for a category before moving to the next category', () => {
    const rules = cs({ hate: 'Low', violence: 'Low' });
    const v = evaluateSafety(rules, [sev({ violence: 'high' }), sev({ hate: 'medium' })]);
    assert.equal(v.blocked && 'category' in v ? v.category : undefined, 'hate');
  });

  it('does not police a category without a ceiling', () => {
    assert.equal(evaluateSafety(cs({ hate: 'Safe' }), [sev({ violence: 'high', sexual: 'high' })]).blocked, false);
  });

  it('fails closed when Prompt Shields are required and there is no filter block at all', () => {
    assert.deepEqual(evaluateSafety(cs({ requirePromptShields: true }), []), {
      blocked: true,
      code: 'inference_policy_prompt_shields_required',
      message:
        'Response blocked: InferencePolicy requires Prompt Shields but the upstream response carried no prompt_filter_results annotations',
    });
    assert.equal(evaluateSafety(cs({ requirePromptShields: true }), [{}]).blocked, false);
  });

  it('never blocks when the floor is inactive, even with high findings and no annotations', () => {
    assert.equal(evaluateSafety(cs({ requirePromptShields: false }), []).blocked, false);
    assert.equal(evaluateSafety(null, [sev({ hate: 'high' })]).blocked, false);
  });
});

describe('extractAnnotations', () => {
  it('collects prompt_filter_results[*].content_filter_results from a 2xx body', () => {
    const body = {
      prompt_filter_results: [
        { prompt_index: 0, content_filter_results: { hate: 1 } },
        { prompt_index: 1 },
        'junk',
        { content_filter_results: { sexual: 2 } },
      ],
    };
    assert.deepEqual(extractAnnotations(body, 200), [{ hate: 1 }, { sexual: 2 }]);
  });

  it('collects error.innererror.content_filter_result from a 400 body', () => {
    const body = {
      error: { code: 'content_filter', innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: { hate: 1 } } },
    };
    assert.deepEqual(extractAnnotations(body, 400), [{ hate: 1 }]);
    assert.deepEqual(extractAnnotations(body, 200), []);
  });

  it('returns nothing for other statuses and for malformed bodies, without throwing', () => {
    assert.deepEqual(extractAnnotations({ prompt_filter_results: [{ content_filter_results: {} }] }, 500), []);
    for (const junk of [undefined, null, 'x', 3, [], { prompt_filter_results: 'no' }, { error: 'no' }, { error: { innererror: null } }]) {
      assert.deepEqual(extractAnnotations(junk, 200), []);
      assert.deepEqual(extractAnnotations(junk, 400), []);
    }
  });
});
