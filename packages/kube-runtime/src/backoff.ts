/**
 * The reconnect delay after `failures` consecutive failures: the ceiling doubles from `initialMs`
 * per failure up to `maxMs`, and `jitter` in [0, 1] picks a delay in [ceiling/2, ceiling].
 * Pure: the watcher's step function and {@link Backoff} both use it.
 */
export function backoffDelayMs(initialMs: number, maxMs: number, failures: number, jitter: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(failures, 30));
  return Math.round(ceiling / 2 + (jitter * ceiling) / 2);
}

/**
 * Reconnect backoff: exponential with jitter, capped, reset after a healthy period.
 * The first delay is in [initial/2, initial]; each failure doubles the ceiling up to `maxMs`.
 */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly initialMs: number,
    private readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  /** The delay before the next attempt. */
  next(): number {
    const d = backoffDelayMs(this.initialMs, this.maxMs, this.attempt, this.random());
    this.attempt = Math.min(this.attempt + 1, 30);
    return d;
  }

  reset(): void {
    this.attempt = 0;
  }

  /** Failures since the last reset. */
  failures(): number {
    return this.attempt;
  }
}
