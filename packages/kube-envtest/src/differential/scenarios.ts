import { builtinScenarios } from './scenarios-builtin.js';
import { customScenarios } from './scenarios-custom.js';
import { errorScenarios, listScenarios, watchScenarios } from './scenarios-api.js';
import { authScenarios, discoveryScenarios, hostileScenarios, lifecycleScenarios } from './scenarios-cluster.js';
import type { Scenario } from './types.js';

/** Every scenario of the differential suite, in run order; ids are unique (checked here). */
export function allScenarios(): Scenario[] {
  const all = [
    ...discoveryScenarios(),
    ...builtinScenarios(),
    ...customScenarios(),
    ...listScenarios(),
    ...watchScenarios(),
    ...errorScenarios(),
    ...authScenarios(),
    ...lifecycleScenarios(),
    ...hostileScenarios(),
  ];
  const seen = new Set<string>();
  for (const s of all) {
    if (seen.has(s.id)) throw new Error(`two scenarios have the id ${s.id}`);
    seen.add(s.id);
  }
  return all;
}
