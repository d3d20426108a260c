/**
 * What a router echoes of its view (kars-wire-contract.md §2.5): per echo kind, the digest it
 * enforces, its last error and the last digest it refused, with xDS-like load semantics; and, apart
 * from those, its dry-run slots (ADR 0050). The real router and the controller's test router both
 * publish `EchoLedger.echo()`, so what a router echoes cannot be computed two ways. Which echo
 * kinds an outcome sets is each kind's descriptor's (`echoesOf`).
 *
 * Guarantees: synchronous; time comes from the clock it is given.
 */
import { kubeTime } from '@kars/kube-core';
import type { DryRunEcho, DryRunKind, EchoKind } from '@kars/policy-api';
import { dryRunSlot } from '@kars/policy-api';
import type { DryRunOutcomes, LoadOutcome, ViewOutcomes } from './router-view.js';
import type { ProfileKind } from './kinds/descriptor.js';
import { EGRESS_APPROVAL_KIND } from './kinds/egress-approval.js';
import { INFERENCE_POLICY_KIND } from './kinds/inference-policy.js';
import { TOOL_POLICY_KIND } from './kinds/tool-policy.js';

/** What a router echoes: digest enforced, last error and last refused digest, per kind; and its dry-run slots (ADR 0050). */
export interface EchoState {
  digests: Partial<Record<EchoKind, string | null>>;
  errors: Partial<Record<EchoKind, string>>;
  dryRun?: DryRunEcho;
  rejected: Partial<Record<EchoKind, string>>;
}

/** One entry of `/internal/policy-status` (schema_version 1, snake_case as the contract spells it). */
export interface PolicyStatusEntry {
  kind: EchoKind;
  digest: string | null;
  source_path: string;
  loaded_at: string | null;
  last_error: string | null;
  /** kars addition: the digest of the bytes this router refused (null when it refused nothing). */
  rejected_digest: string | null;
}

interface KindState {
  digest: string | null;
  source: string;
  loadedAtMs: number | undefined;
  error: string | undefined;
  rejected: string | undefined;
}

function echoOf(kinds: ReadonlyMap<string, KindState>): DryRunEcho {
  const out: DryRunEcho = { digests: {}, errors: {}, rejected: {} };
  for (const k of [...kinds.keys()].sort()) {
    const s = kinds.get(k) as KindState;
    out.digests[k] = s.digest;
    if (s.error) out.errors[k] = s.error;
    if (s.rejected) out.rejected[k] = s.rejected;
  }
  return out;
}

/** Longest error message kept per kind (the contract truncates to 512 bytes). */
export const MAX_ERROR_LENGTH = 512;

/**
 * Per-kind echo state with the contract's load semantics: a load replaces (and clears the error);
 * "none" clears; an error keeps the last good digest, records the error and the refused digest.
 * A profile kind's outcome sets each of its echo kinds, as its descriptor's `echoesOf` says.
 */
export class EchoLedger {
  private readonly kinds = new Map<EchoKind, KindState>();
  /** The dry-run slots (`<Kind>/<name>`), kept apart from the enforced kinds. */
  private readonly dryRunSlots = new Map<string, KindState>();

  constructor(private readonly now: () => number) {}

  /** Record an outcome for `kind`; returns whether anything echoed changed. */
  apply(kind: EchoKind, outcome: LoadOutcome<unknown>): boolean {
    return this.record(this.kinds, kind, outcome);
  }

  /** {@link apply} into `map` under `key`: the enforced kinds, or the dry-run slots. */
  private record<K extends string>(map: Map<K, KindState>, key: K, outcome: LoadOutcome<unknown>): boolean {
    const prev = map.get(key);
    let next: KindState;
    if (outcome.kind === 'loaded') {
      const d = outcome.digest;
      next = {
        digest: d,
        source: outcome.source,
        loadedAtMs: prev?.digest === d && prev.loadedAtMs !== undefined ? prev.loadedAtMs : this.now(),
        error: outcome.warning?.slice(0, MAX_ERROR_LENGTH),
        rejected: undefined,
      };
    } else if (outcome.kind === 'none') {
      next = { digest: null, source: prev?.source ?? '', loadedAtMs: undefined, error: undefined, rejected: undefined };
    } else {
      next = {
        digest: prev?.digest ?? null,
        source: outcome.source,
        loadedAtMs: prev?.loadedAtMs,
        error: outcome.error.slice(0, MAX_ERROR_LENGTH),
        rejected: outcome.rejectedDigest ?? undefined,
      };
    }
    const changed = !prev || prev.digest !== next.digest || prev.error !== next.error || prev.rejected !== next.rejected;
    map.set(key, next);
    return changed;
  }

  /** Record a profile kind's outcome under each of its echo kinds; returns whether anything echoed changed. */
  applyProfile<L>(kind: Pick<ProfileKind<never, unknown, L>, 'echoesOf'>, outcome: L): boolean {
    let changed = false;
    for (const e of kind.echoesOf(outcome)) changed = this.record(this.kinds, e.kind, e.outcome) || changed;
    return changed;
  }

  /** Record a whole view; returns whether anything echoed changed. */
  applyView(view: ViewOutcomes): boolean {
    let changed = this.applyProfile(INFERENCE_POLICY_KIND, view.inference);
    changed = this.applyProfile(TOOL_POLICY_KIND, view.tools) || changed;
    changed = this.apply(EGRESS_APPROVAL_KIND.echoKinds[0], view.egress) || changed;
    changed = this.applyDryRun(view.dryRun) || changed;
    return changed;
  }

  /**
   * Record the dry-run policies of a view, each echo kind in its slot (`<Kind>/<name>`, ADR 0050)
   * with the same load semantics as an enforced kind; a slot whose policy no longer reaches the
   * sandbox is dropped.
   */
  applyDryRun(dryRun: DryRunOutcomes): boolean {
    const keep = new Set<string>();
    let changed = false;
    const slots = <L>(kind: Pick<ProfileKind<never, unknown, L>, 'echoesOf'>, name: string, outcome: L): void => {
      for (const e of kind.echoesOf(outcome)) {
        const slot = dryRunSlot(e.kind as DryRunKind, name);
        keep.add(slot);
        changed = this.record(this.dryRunSlots, slot, e.outcome) || changed;
      }
    };
    for (const { name, outcome } of dryRun.inference) slots(INFERENCE_POLICY_KIND, name, outcome);
    for (const { name, outcome } of dryRun.tools) slots(TOOL_POLICY_KIND, name, outcome);
    for (const slot of [...this.dryRunSlots.keys()])
      if (!keep.has(slot)) {
        this.dryRunSlots.delete(slot);
        changed = true;
      }
    return changed;
  }

  /** What to publish in the echo Lease (`dryRun` only when the router records a dry-run policy). */
  echo(): EchoState {
    const out: EchoState = echoOf(this.kinds);
    if (this.dryRunSlots.size > 0) out.dryRun = echoOf(this.dryRunSlots);
    return out;
  }

  /** The `/internal/policy-status` entries, sorted by kind. */
  statusEntries(): PolicyStatusEntry[] {
    return [...this.kinds.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([kind, s]) => ({
        kind,
        digest: s.digest,
        source_path: s.source,
        loaded_at: s.loadedAtMs === undefined ? null : kubeTime(s.loadedAtMs),
        last_error: s.error ?? null,
        rejected_digest: s.rejected ?? null,
      }));
  }
}
