/** Small commander helpers shared by the policy commands. */

/** Collect a repeatable option into an array. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/**
 * A whole-number flag: decimal digits become a number; anything else is passed through as given, so policy-api's
 * validation names it with the controller's message (`must be a non-negative integer, got abc`).
 */
export function wholeNumber(value: string): number | string {
  return /^\d{1,15}$/.test(value) ? Number(value) : value;
}

/** Parse repeated `k=v` flags into a map; a flag without `=` is an error naming it. */
export function labels(values: string[] | undefined, flag: string): Record<string, string> | undefined {
  if (values === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const v of values) {
    const i = v.indexOf('=');
    if (i <= 0) throw new Error(`${flag} "${v}" must be key=value`);
    out[v.slice(0, i)] = v.slice(i + 1);
  }
  return out;
}
