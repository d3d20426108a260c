import type { KarsSandbox } from '@kars/policy-api';
import { routerView } from '@kars/policy-compiler/runtime';
import type { DataReader, RouterCapabilities, ViewOptions } from '@kars/policy-compiler/runtime';
import type { PolicyState } from '../state.js';

export type { DataReader } from '@kars/policy-compiler/runtime';

/**
 * Recompute everything this sandbox's router enforces from the sandbox and its compiled
 * ConfigMaps, with the wire contract's `routerView` (the same function the controller's test
 * router uses), and load it into `state`. Returns when the next approval expires (epoch ms), so
 * the caller can recompute then. `nowMs` is wall time (epoch ms), compared with approvals' expiry.
 * `namespace` lists the namespace's compiled ConfigMaps (to find dry-run policies, ADR 0050) and
 * reads the generation each was compiled from.
 */
export function loadFromConfigMaps(
  state: PolicyState,
  sandbox: KarsSandbox | undefined,
  read: DataReader,
  sourcePrefix: string,
  capabilities: RouterCapabilities,
  nowMs: number,
  namespace?: Pick<ViewOptions, 'list' | 'generationOf'>,
): number | undefined {
  const view = routerView(sandbox, read, { nowMs, capabilities, sourcePrefix, ...namespace });
  state.setView(view);
  return view.nextExpiryMs;
}
