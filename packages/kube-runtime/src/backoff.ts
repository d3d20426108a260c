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
    const ceiling = Math.min(this.maxMs, this.initialMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    return Math.round(ceiling / 2 + (this.random() * ceiling) / 2);
  }

  reset(): void {
    this.attempt = 0;
  }

  /** Failures since the last reset. */
  failures(): number {
    return this.attempt;
  }
}
