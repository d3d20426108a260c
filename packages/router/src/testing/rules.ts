/** Policy fixtures for router tests: an InferencePolicy, a ToolPolicy or a content-safety floor with every field unset but `over`. */
import type { InferenceRules, ToolRules } from '../snapshot.js';
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
    enforcement: 'Enforce',
    ...over,
  };
}

/** ToolRules named `name` for any tool on any server, with nothing set except what `over` sets. */
export function toolRules(name: string, over: Partial<ToolRules> = {}): ToolRules {
  return {
    name,
    appliesTo: { tool: null, mcpServer: null },
    rateLimit: null,
    approval: null,
    agt: null,
    toolPins: [],
    unpinnedTools: 'Allow',
    enforcement: 'Enforce',
    ...over,
  };
}

/** A content-safety floor with every ceiling unset except those in `over`. */
export function safetyRules(over: Partial<ContentSafetyRules>): ContentSafetyRules {
  return { hate: null, selfHarm: null, sexual: null, violence: null, requirePromptShields: null, ...over };
}
