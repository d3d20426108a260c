/**
 * The two time formats of the Kubernetes API, in one place (issue 22 item 4): `Time`
 * (`metav1.Time`: creation and status timestamps) and `MicroTime` (`metav1.MicroTime`: Lease
 * `renewTime` and `acquireTime`, Event `eventTime`). Both are RFC 3339 in UTC with `Z`.
 *
 * Guarantees: pure; a `Time` is 20 characters and rounds down to the second; a `MicroTime` is 27
 * characters, its last three fractional digits 0 (JavaScript time has millisecond precision).
 */

/** Epoch milliseconds as a Kubernetes `Time`: `2026-12-02T06:00:00Z`. */
export function kubeTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.000Z$/, 'Z');
}

/** Epoch milliseconds as a Kubernetes `MicroTime`: `2026-12-02T06:00:00.123000Z`. */
export function kubeMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
