import { badRequest } from '@kars/kube-core';
import type { ApiError } from '@kars/kube-core';
import { Composer, isAlias, isMap, isPair, isScalar, isSeq, Lexer, Parser } from 'yaml';
import type { CST, Document, Node as YamlNode } from 'yaml';
import { MAX_OBJECT_BYTES } from '../storage/store.js';

/**
 * Limits on what a request body may decode to, checked before the object is built.
 *
 * Guarantees: a JSON or YAML body nested deeper than {@link MAX_DEPTH} is refused after reading at
 * most that many levels (a linear scan for JSON; the YAML parser is stopped as its stack passes the
 * limit), so it costs neither a deep parse nor a stack overflow later; a YAML body whose aliases
 * would expand past {@link MAX_OBJECT_BYTES} is refused from its node tree, which is no larger than
 * the body, before any alias is expanded.
 *
 * Caveats: the YAML limits bound the work of hostile bodies, not of large honest ones: a flat
 * 3 MiB YAML document is still parsed in full on the event loop, as JSON is.
 */

/**
 * Deepest nesting of arrays and objects a request body may have. kube's decoders stop at 10,000,
 * but the YAML composer overflows the stack near 1,000 levels; real objects stay well below 100.
 */
export const MAX_DEPTH = 256;

function tooDeep(format: string): ApiError {
  return badRequest(`error decoding ${format}: the object is nested more than ${MAX_DEPTH} levels deep`);
}

/** Refuse JSON text nested deeper than {@link MAX_DEPTH}, without parsing it (one linear pass). */
export function checkJsonDepth(text: string): void {
  // Nesting needs an opening bracket per level: with no more than MAX_DEPTH of them in the whole
  // text (found by the native indexOf), no scan is needed. Most bodies end here.
  if (countUpTo(text, '{', MAX_DEPTH + 1) + countUpTo(text, '[', MAX_DEPTH + 1) <= MAX_DEPTH) return;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_DEPTH) throw tooDeep('JSON');
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
}

/** How often `ch` occurs in `text`, counting no further than `max`. */
function countUpTo(text: string, ch: string, max: number): number {
  let n = 0;
  for (let i = text.indexOf(ch); i >= 0 && n < max; i = text.indexOf(ch, i + 1)) n++;
  return n;
}

/**
 * Parse one YAML document with bounded work: the parser stops once its stack (about one entry per
 * nesting level, plus two) passes {@link MAX_DEPTH}, and aliases are expanded only when the result
 * stays within {@link MAX_OBJECT_BYTES}. Throws a 400 ApiError for anything refused or malformed.
 */
export function parseYamlBounded(text: string): unknown {
  const parser = new Parser();
  const tokens: CST.Token[] = [];
  const stackLimit = MAX_DEPTH + 2;
  for (const lexeme of new Lexer().lex(text, false)) {
    for (const t of parser.next(lexeme)) tokens.push(t);
    if (parser.stack.length > stackLimit) throw tooDeep('YAML');
  }
  for (const t of parser.end()) tokens.push(t);
  const docs = [...new Composer().compose(tokens, true, text.length)];
  const doc = docs[0];
  if (!doc) return null;
  if (docs.length > 1) throw badRequest('error decoding YAML: the body holds more than one document');
  const err = doc.errors[0];
  if (err) throw badRequest(`error decoding YAML: ${err.message}`, err);
  checkAliasExpansion(doc);
  return doc.toJS({ maxAliasCount: -1 }) as unknown;
}

/**
 * Estimate the JSON size of the document with aliases expanded, from its node tree, and refuse it
 * when that passes {@link MAX_OBJECT_BYTES} (the "billion laughs" and "one big anchor, many
 * aliases" attacks). An alias always follows its anchor, so every alias meets an anchor whose size
 * is already known, unless it points into its own ancestor: that recursive alias is refused too.
 */
function checkAliasExpansion(doc: Document.Parsed): void {
  let aliases = 0;
  const size = new Map<unknown, number>();
  const open = new Set<unknown>();
  const refuse = (n: number): never => {
    throw badRequest(
      `error decoding YAML: its aliases expand it to more than ${n} bytes; objects are limited to ${MAX_OBJECT_BYTES} bytes`,
    );
  };
  const measure = (node: unknown): number => {
    if (node === null || node === undefined) return 4;
    if (isAlias(node)) {
      aliases++;
      const target = node.resolve(doc);
      if (target === undefined) return 4;
      if (open.has(target)) throw badRequest(`error decoding YAML: alias *${node.source} refers to a node that contains it`);
      return size.get(target) ?? measure(target);
    }
    let n: number;
    if (isScalar(node)) n = String(node.value).length + 2;
    else if (isPair(node)) n = measure(node.key) + measure(node.value) + 1;
    else if (isMap(node) || isSeq(node)) {
      open.add(node);
      n = 2;
      for (const item of node.items as unknown[]) n += measure(item) + 1;
      open.delete(node);
    } else n = 4;
    size.set(node, n);
    return n;
  };
  const total = measure(doc.contents as YamlNode | null);
  if (aliases > 0 && total > MAX_OBJECT_BYTES) refuse(total);
}
