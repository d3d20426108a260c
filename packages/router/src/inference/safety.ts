/**
 * The InferencePolicy content-safety floor (kars-wire-contract.md §5.3 step 6). Pure: no I/O.
 *
 * Rules:
 * - The floor is **active** only when at least one category ceiling is set or Prompt Shields are
 *   required; an inactive floor never blocks.
 * - Severities form the ladder Safe < Low < Medium < High, read case-insensitively; an unknown or
 *   missing severity is ignored.
 * - Categories are checked in the fixed order hate → self_harm → sexual → violence; within a
 *   category, annotation blocks in the order given. The first observed severity **strictly above**
 *   its ceiling blocks (a severity equal to the ceiling passes). An unset ceiling is not policed.
 * - With `requirePromptShields`, a response that carries no filter block at all is blocked
 *   (fail closed).
 *
 * Annotations come from `prompt_filter_results[*].content_filter_results` of a 2xx body and from
 * `error.innererror.content_filter_result` of a 400 body ({@link extractAnnotations}).
 */
import { isObject } from '@kars/kube-core';
import { contentSafetyFloorActive } from '@kars/policy-api';
import type { InferenceRules, Severity } from '../snapshot.js';

/** The `contentSafety` block of a compiled InferencePolicy. */
export type ContentSafetyRules = NonNullable<InferenceRules['contentSafety']>;

/** Wire names of the policed categories, in checking order. */
export type SafetyCategory = 'hate' | 'self_harm' | 'sexual' | 'violence';

/** One filter block: an object keyed by category (`{hate: {filtered, severity}, …}`). */
export type FilterAnnotation = Record<string, unknown>;

/** The verdict of the floor. */
export type SafetyVerdict =
  | { blocked: false }
  | { blocked: true; code: 'inference_policy_content_safety_exceeded'; message: string; category: SafetyCategory }
  | { blocked: true; code: 'inference_policy_prompt_shields_required'; message: string };

const PASS: SafetyVerdict = Object.freeze({ blocked: false }) as SafetyVerdict;

const LADDER: readonly Severity[] = ['Safe', 'Low', 'Medium', 'High'];

/** Wire category → policy field, in checking order. */
const CATEGORIES: ReadonlyArray<readonly [SafetyCategory, 'hate' | 'selfHarm' | 'sexual' | 'violence']> = [
  ['hate', 'hate'],
  ['self_harm', 'selfHarm'],
  ['sexual', 'sexual'],
  ['violence', 'violence'],
];

/** The rank of a severity on the ladder (0 Safe … 3 High), case-insensitive; undefined when unknown. */
export function severityRank(s: unknown): number | undefined {
  if (typeof s !== 'string') return undefined;
  switch (s.toLowerCase()) {
    case 'safe':
      return 0;
    case 'low':
      return 1;
    case 'medium':
      return 2;
    case 'high':
      return 3;
    default:
      return undefined;
  }
}

/** Whether the floor does anything: a ceiling is set or Prompt Shields are required (policy-api's one rule). */
export function isFloorActive(rules: ContentSafetyRules | null | undefined): rules is ContentSafetyRules {
  return contentSafetyFloorActive(rules);
}

/**
 * Decide whether a response may pass the floor. `annotations` are the filter blocks the response
 * carried (empty when it carried none).
 */
export function evaluateSafety(rules: ContentSafetyRules | null | undefined, annotations: readonly FilterAnnotation[]): SafetyVerdict {
  if (!isFloorActive(rules)) return PASS;
  for (const [wire, field] of CATEGORIES) {
    const ceiling = severityRank(rules[field]);
    if (ceiling === undefined) continue;
    for (const a of annotations) {
      const finding = a[wire];
      if (typeof finding !== 'object' || finding === null) continue;
      const observed = severityRank((finding as Record<string, unknown>)['severity']);
      if (observed !== undefined && observed > ceiling) {
        return {
          blocked: true,
          code: 'inference_policy_content_safety_exceeded',
          category: wire,
          message: `Response blocked: ${wire} severity ${LADDER[observed] ?? '?'} exceeds InferencePolicy ceiling ${LADDER[ceiling] ?? '?'}`,
        };
      }
    }
  }
  if (rules.requirePromptShields === true && annotations.length === 0) {
    return {
      blocked: true,
      code: 'inference_policy_prompt_shields_required',
      message:
        'Response blocked: InferencePolicy requires Prompt Shields but the upstream response carried no prompt_filter_results annotations',
    };
  }
  return PASS;
}

/**
 * The filter blocks of a parsed upstream body: `prompt_filter_results[*].content_filter_results`
 * for a 2xx status, `error.innererror.content_filter_result` for 400, none otherwise. Never throws.
 */
export function extractAnnotations(body: unknown, status: number): FilterAnnotation[] {
  if (!isObject(body)) return [];
  if (status >= 200 && status < 300) {
    const pfr = body['prompt_filter_results'];
    if (!Array.isArray(pfr)) return [];
    const out: FilterAnnotation[] = [];
    for (const item of pfr) {
      if (isObject(item) && isObject(item['content_filter_results'])) out.push(item['content_filter_results']);
    }
    return out;
  }
  if (status === 400) {
    const err = body['error'];
    const inner = isObject(err) ? err['innererror'] : undefined;
    const cfr = isObject(inner) ? inner['content_filter_result'] : undefined;
    return isObject(cfr) ? [cfr] : [];
  }
  return [];
}
