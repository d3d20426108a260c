/**
 * Go's formatting of values in kube-apiserver's messages, where kars must print them alike: `%q`
 * of a string, and unicode.IsPrint.
 */

/** Go's unicode.IsPrint: a letter, mark, number, punctuation or symbol, or the ASCII space. */
export const isGoPrintable = (ch: string): boolean => ch === ' ' || /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u.test(ch);

/** Go's `%q` of a string (strconv.Quote), for messages that quote user input as kube does. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c === 7) out += '\\a';
    else if (c === 8) out += '\\b';
    else if (c === 12) out += '\\f';
    else if (c === 10) out += '\\n';
    else if (c === 13) out += '\\r';
    else if (c === 9) out += '\\t';
    else if (c === 11) out += '\\v';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c < 0x80 || isGoPrintable(ch)) out += ch;
    else if (c > 0xffff) out += `\\U${c.toString(16).padStart(8, '0')}`;
    else out += `\\u${c.toString(16).padStart(4, '0')}`;
  }
  return `${out}"`;
}
