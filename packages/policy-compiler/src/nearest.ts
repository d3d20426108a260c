/**
 * "Did you mean …?" for a misspelt field name: the Levenshtein distance and the nearest of a set of
 * known names. Pure string functions, no schema knowledge (see unknown-fields.ts for that).
 */

/**
 * The Levenshtein distance between `a` and `b`: the fewest single-character insertions,
 * deletions and substitutions that turn one into the other. Counted in UTF-16 code units, so a
 * character outside the BMP counts as two; a metric (symmetric, zero only for equal strings,
 * triangle inequality). O(|a|·|b|) time, O(min) memory.
 */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  if (a.length < b.length) [a, b] = [b, a];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const sub = (prev[j - 1] ?? 0) + (a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1);
      cur.push(Math.min(sub, (prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/**
 * The largest distance still worth suggesting for a name of this length: 2 (one swapped pair of
 * letters, `prot` for `port`), a third of the name for long names, and always less than the
 * name's length (a name with every character changed is no typo).
 */
export function suggestionThreshold(name: string): number {
  return Math.min(Math.max(2, Math.floor(name.length / 3)), name.length - 1);
}

/**
 * The known name nearest to `name`, or undefined when none is close enough to be a plausible
 * typo (distance above {@link suggestionThreshold}, compared case-insensitively so `TokenBudget`
 * finds `tokenBudget`). Ties go to the earlier candidate, so the result is deterministic for a
 * given candidate order. `name` itself is never suggested.
 */
export function nearestName(name: string, candidates: Iterable<string>): string | undefined {
  const lower = name.toLowerCase();
  const limit = suggestionThreshold(name);
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    if (c === name) continue;
    const d = editDistance(lower, c.toLowerCase());
    if (d <= limit && d < bestD) {
      best = c;
      bestD = d;
    }
  }
  return best;
}
