import { systemClock } from '@kars/kube-core';
import type { Clock } from '@kars/kube-core';
import type { Heartbeat } from '@kars/policy-api';

/** What `/internal/policy-status` reports about the heartbeat (snake_case, as the contract spells it). */
export interface HeartbeatStatus {
  /** Seconds: time since this router last saw a new heartbeat, plus the transit lag of that heartbeat. */
  staleness_seconds: number;
  /** Controller wall time written into the newest heartbeat seen (null before the first). */
  controller_time: string | null;
  /** This router's wall time when it saw that heartbeat. */
  received_at: string | null;
  resource_version: string | null;
  holder: string | null;
  /** Transit of the newest heartbeat beyond the smallest recent transit (clock skew cancels out), seconds. */
  lag_seconds: number;
  /** Heartbeats seen since start (the first one only sets the baseline). */
  seen: number;
}

const WINDOW = 32;

/**
 * The router's policy staleness, from the controller's heartbeat (ADR 0011).
 *
 * staleness = (now − when this router saw the newest heartbeat change) + lag of that heartbeat.
 * - The first term uses only this router's monotonic clock, so no clock skew can shrink it: a
 *   watch that silently died, a stalled apiserver or watch cache, or a controller that stopped
 *   writing all make it grow by one second per second.
 * - "Change" means a new resourceVersion: the first heartbeat seen (typically from the initial
 *   list, possibly written long ago) only sets the baseline, and a relist that returns the same
 *   object does not count as fresh. Until a change is seen, staleness counts from the start.
 * - The lag term catches a path that still delivers but late: transit = receipt wall time −
 *   controller wall time includes the skew between the two clocks, so only its excess over the
 *   smallest transit of the last 32 heartbeats is used; the skew cancels, and the term is ≥ 0.
 */
export class HeartbeatStaleness {
  private readonly startedAt: number;
  private lastRv: string | undefined;
  private receivedAt: number | undefined;
  private receivedWallMs: number | undefined;
  private last: Heartbeat | undefined;
  private lagMs = 0;
  private seen = 0;
  private readonly transits: number[] = [];

  /** `clock.now()` measures staleness; `clock.wallNow()` stamps receipt (compared with the controller's stamp). */
  constructor(private readonly clock: Clock = systemClock) {
    this.startedAt = clock.now();
  }

  /** Record a heartbeat delivered by the watch. */
  observe(hb: Heartbeat): void {
    if (hb.resourceVersion !== '' && hb.resourceVersion === this.lastRv) return;
    const baseline = this.lastRv === undefined;
    this.lastRv = hb.resourceVersion;
    this.seen++;
    if (baseline) return;
    this.last = hb;
    this.receivedAt = this.clock.now();
    this.receivedWallMs = this.clock.wallNow();
    if (Number.isFinite(hb.atMs)) {
      const transit = this.receivedWallMs - hb.atMs;
      this.transits.push(transit);
      if (this.transits.length > WINDOW) this.transits.shift();
      this.lagMs = Math.max(0, transit - Math.min(...this.transits));
    } else {
      this.lagMs = 0;
    }
  }

  /** Current staleness in seconds. */
  stalenessSeconds(): number {
    const since = this.receivedAt ?? this.startedAt;
    return Math.max(0, this.clock.now() - since + (this.receivedAt === undefined ? 0 : this.lagMs)) / 1000;
  }

  /** Controller time of the newest heartbeat seen (ms since epoch), if any. */
  newestControllerTimeMs(): number | undefined {
    return this.last && Number.isFinite(this.last.atMs) ? this.last.atMs : undefined;
  }

  status(): HeartbeatStatus {
    const at = this.newestControllerTimeMs();
    return {
      staleness_seconds: Math.round(this.stalenessSeconds() * 1000) / 1000,
      controller_time: at === undefined ? null : new Date(at).toISOString(),
      received_at: this.receivedWallMs === undefined ? null : new Date(this.receivedWallMs).toISOString(),
      resource_version: this.last?.resourceVersion ?? null,
      holder: this.last?.holder ?? null,
      lag_seconds: Math.round(this.lagMs) / 1000,
      seen: this.seen,
    };
  }
}
