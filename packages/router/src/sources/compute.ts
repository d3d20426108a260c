import type { KarsSandbox } from '@kars/policy-api';
import { routerView } from '@kars/policy-compiler/runtime';
import type { DataReader, RouterCapabilities } from '@kars/policy-compiler/runtime';
import type { PolicyState } from '../state.js';

export type { DataReader } from '@kars/policy-compiler/runtime';

/**
 * Recompute everything this sandbox's router enforces from the sandbox and its compiled
 * ConfigMaps, with the wire contract's `routerView` (the same function the controller's test
 * router uses), and load it into `state`. Returns when the next approval expires (epoch ms), so
 * the caller can recompute then. `nowMs` is wall time (epoch ms), compared with approvals' expiry.
 */
export function loadFromConfigMaps(
  state: PolicyState,
  sandbox: KarsSandbox | undefined,
  read: DataReader,
  sourcePrefix: string,
  capabilities: RouterCapabilities,
  nowMs: number,
): number | undefined {
  const view = routerView(sandbox, read, { nowMs, capabilities, sourcePrefix });
  state.setView(view);
  return view.nextExpiryMs;
}
