/** Policy fixtures for router tests: an InferencePolicy or content-safety floor with every field unset but `over`. */
import type { InferenceRules } from '../snapshot.js';
import type { ContentSafetyRules } from '../inference/safety.js';

/** InferenceRules with every field null except those in `over`. */
export function inferenceRules(over: Partial<InferenceRules> = {}): InferenceRules {
  return {
    action: null,
    tokenBudget: null,
    contentSafety: null,
    modelPreference: null,
    provider: null,
    guardrails: null,
    displayName: null,
    ...over,
  };
}

/** A content-safety floor with every ceiling unset except those in `over`. */
export function safetyRules(over: Partial<ContentSafetyRules>): ContentSafetyRules {
  return { hate: null, selfHarm: null, sexual: null, violence: null, requirePromptShields: null, ...over };
}
