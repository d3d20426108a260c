/**
 * How a router process runs its V8 heap (issue 23 item 2; ADR 0059). A router is a sidecar per
 * sandbox, so its resident set under load is mostly V8's young generation and the garbage its old
 * generation keeps until the next mark-compact: both are capped here, the first by a flag that only
 * the command line can set, the second by a flag the router sets on itself at start.
 */
import v8 from 'node:v8';

/**
 * The `NODE_OPTIONS` every router process starts with: the router's container in the Helm chart and
 * the kustomize example, `kars up`, kube-envtest's `startKars` and the benchmarks. A semi-space of
 * at most 4 MiB (two of them: an 8 MiB young generation instead of V8's 32 MiB; 8 MiB semi-spaces
 * measured 6 MB more at 1,000 req/s for the same CPU, ADR 0059). V8 reads it only when the heap is
 * set up, so the router cannot set it on itself.
 */
export const ROUTER_NODE_OPTIONS = '--max-semi-space-size=4';

/**
 * The old generation may grow to 1.3× what the last mark-compact left live before the next one
 * (V8's own factor reaches 4× on a machine with this much memory): a mark-compact of a router's
 * ~10 MB live heap costs ~4 ms, so a busy router runs one every few seconds instead of carrying
 * 30–40 MB of promoted garbage.
 */
export const ROUTER_HEAP_GROWING_PERCENT = 30;

/** The V8 flag {@link tuneRouterHeap} sets. */
export const ROUTER_RUNTIME_V8_FLAG = `--heap-growing-percent=${ROUTER_HEAP_GROWING_PERCENT}`;

/** Node options `existing` plus the router's, for a child's environment (the router's are not repeated). */
export function withRouterNodeOptions(existing: string | undefined): string {
  const have = (existing ?? '').trim();
  return have.includes('--max-semi-space-size') ? have : [have, ROUTER_NODE_OPTIONS].filter(Boolean).join(' ');
}

/**
 * What the environment of a `kars <args…>` child adds: for a router (`args[0] === 'router'`), its
 * node options on top of `existing` (this process's `NODE_OPTIONS`); nothing for another command.
 */
export function routerChildEnv(args: readonly string[], existing: string | undefined): { NODE_OPTIONS?: string } {
  return args[0] === 'router' ? { NODE_OPTIONS: withRouterNodeOptions(existing) } : {};
}

/** Set the router's heap-growing factor on this process (V8 reads it at each mark-compact). Idempotent. */
export function tuneRouterHeap(): void {
  v8.setFlagsFromString(ROUTER_RUNTIME_V8_FLAG);
}
