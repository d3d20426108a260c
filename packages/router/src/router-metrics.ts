/**
 * The router's own Prometheus metrics (beside the watch runtime's, `RuntimeMetrics`), registered
 * once per router on its registry. Request counts are kept in plain numbers on the hot path and
 * handed to prom-client at scrape time: a labelled `inc()` hashes its labels on every call. The
 * gauges read their values at scrape time through {@link RouterMetricReads}.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { DryRunCount } from './decisions/recorder.js';
import type { BudgetUsage } from './inference/budget.js';

/** What the gauges read at scrape time. */
export interface RouterMetricReads {
  /** Milliseconds since the view was last confirmed current (Infinity: never). */
  viewAgeMs: () => number;
  /** The heartbeat staleness in seconds; absent for a directory-fed router (no gauge then). */
  stalenessSeconds?: () => number;
  /** The sandbox's token ledger. */
  budget: () => BudgetUsage & { reserved: number };
}

/** The router's counters, each a method the wiring calls. */
export class RouterMetrics {
  readonly #decisions = new Map<string, { labels: { surface: string; decision: string }; n: number; published: number }>();
  readonly #stale: Counter;
  readonly #admission: Counter;
  readonly #dryRun: Counter;

  constructor(registry: Registry, reads: RouterMetricReads) {
    const decisions = this.#decisions;
    new Counter({
      name: 'kars_router_requests_total',
      help: 'Agent requests by surface and decision.',
      labelNames: ['surface', 'decision'],
      registers: [registry],
      collect() {
        for (const c of decisions.values()) {
          if (c.n > c.published) this.inc(c.labels, c.n - c.published);
          c.published = c.n;
        }
      },
    });
    this.#stale = labelledFromZero(
      registry,
      'kars_router_stale_requests_total',
      'Requests that arrived while the policy view was older than --max-staleness, by mode.',
      'mode',
      ['closed', 'open'],
    );
    new Gauge({
      name: 'kars_router_policy_view_age_seconds',
      help: 'Seconds since the router last confirmed its policy view is current.',
      registers: [registry],
      collect() {
        this.set(Math.min(reads.viewAgeMs(), 1e9) / 1000);
      },
    });
    const staleness = reads.stalenessSeconds;
    if (staleness)
      new Gauge({
        name: 'kars_router_policy_staleness_seconds',
        help: "Seconds since this router last saw the controller heartbeat change on its policy watch, plus that heartbeat's transit lag (ADR 0011). Alert when it exceeds a few heartbeat periods.",
        registers: [registry],
        collect() {
          this.set(staleness());
        },
      });
    // ADR 0050: every would-be decision of a dry-run policy, with or without the log.
    this.#dryRun = new Counter({
      name: 'kars_router_dry_run_decisions_total',
      help: 'What the dry-run policies (spec.enforcement: DryRun) would have decided, by kind, policy, decision and reason; nothing they decide is enforced.',
      labelNames: ['kind', 'policy', 'decision', 'reason'],
      registers: [registry],
    });
    new Gauge({
      name: 'kars_router_budget_tokens',
      help: "This sandbox's token ledger: tokens charged today (state=daily) and this month (state=monthly) in UTC, and tokens held by requests in flight (state=reserved). In memory: it restarts at 0 with the router.",
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const u = reads.budget();
        this.set({ state: 'daily' }, u.dailyUsed);
        this.set({ state: 'monthly' }, u.monthlyUsed);
        this.set({ state: 'reserved' }, u.reserved);
      },
    });
    this.#admission = labelledFromZero(
      registry,
      'kars_router_admission_refused_total',
      'Agent requests refused before their body was read: request_too_large (413) or router_busy (503, in-flight requests or body bytes at their cap).',
      'code',
      ['request_too_large', 'router_busy'],
    );
  }

  /** One agent request's decision on a surface (inference, tools, egress). */
  decision(surface: string, decision: string): void {
    const key = `${surface}\0${decision}`;
    const c = this.#decisions.get(key);
    if (c !== undefined) c.n++;
    else this.#decisions.set(key, { labels: { surface, decision }, n: 1, published: 0 });
  }

  /** A request that arrived over `--max-staleness`, under `mode`. */
  staleRequest(mode: 'closed' | 'open'): void {
    this.#stale.inc({ mode });
  }

  /** A request the admission gate refused before its body was read. */
  admissionRefused(code: 'request_too_large' | 'router_busy'): void {
    this.#admission.inc({ code });
  }

  /** A dry-run policy's would-be decision. */
  dryRunDecision(c: DryRunCount): void {
    this.#dryRun.inc({ kind: c.kind, policy: c.policy, decision: c.decision, reason: c.reason });
  }
}

/** A counter with one label, each of whose known `values` is exported at 0 from the start (so a rate is defined before the first event). */
function labelledFromZero(registry: Registry, name: string, help: string, label: string, values: readonly string[]): Counter {
  const c = new Counter({ name, help, labelNames: [label], registers: [registry] });
  for (const v of values) c.inc({ [label]: v }, 0);
  return c;
}
