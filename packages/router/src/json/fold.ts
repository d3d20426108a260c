/**
 * A key (or method) as a lenient decoder might read it: Go's `encoding/json` (Ollama, most Go MCP
 * servers and gateways) matches keys under Unicode case folding (`ſ` is `s`, the Kelvin sign is
 * `k`), and others normalise compatibility forms or drop invisible characters. The router decides
 * on exact spellings, so a spelling that folds onto another is refused wherever it could be read as
 * one the router did not decide on: MCP envelopes (`tools/envelope.ts`) and the governed fields of
 * an inference request (`inference/apis.ts`).
 *
 * Guarantees: pure; an ASCII lower-case key folds to itself.
 */

/** NFKC, lower case, without whitespace, format or control characters. */
export function fold(s: string): string {
  return s
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\s\p{C}]/gu, '');
}
