import { badRequest } from './errors.js';
import { goQuote } from './go-format.js';

/** One requirement of a label selector, e.g. `tier in (a,b)`, `!legacy` or `replicas gt 2` (`>`/`<`). */
export interface LabelRequirement {
  key: string;
  op: '=' | '!=' | 'in' | 'notin' | 'exists' | '!' | 'gt' | 'lt';
  values: string[];
}

/** A parsed label selector: every requirement must hold. */
export type LabelSelector = LabelRequirement[];

// ---- validation, with kube's messages (k8s.io/apimachinery/pkg/util/validation) ----

const QNAME_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const QNAME = new RegExp(`^${QNAME_FMT}$`);
const QNAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT = `(${QNAME_FMT})?`;
const LABEL_VALUE = new RegExp(`^${LABEL_VALUE_FMT}$`);
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const DNS1123_SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/** kube's RegexError text: `msg (e.g. 'a',  or 'b', regex used for validation is 'fmt')`. */
function regexError(msg: string, fmt: string, ...examples: string[]): string {
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(' or ')}regex used for validation is '${fmt}')`;
}
const maxLen = (n: number): string => `must be no more than ${n} characters`;
/** Go's len(): UTF-8 bytes. */
const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/** kube's IsQualifiedName (a label key): the problems, empty when valid. */
export function labelKeyErrors(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split('/');
  let name: string;
  if (parts.length === 1) name = parts[0] ?? '';
  else if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    name = parts[1] ?? '';
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else {
      if (bytes(prefix) > 253) errs.push(`prefix part ${maxLen(253)}`);
      if (!DNS1123_SUBDOMAIN.test(prefix))
        errs.push(`prefix part ${regexError(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, 'example.com')}`);
    }
  } else
    return [
      `a qualified name ${regexError(QNAME_MSG, QNAME_FMT, 'MyName', 'my.name', '123-abc')} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  if (name.length === 0) errs.push('name part must be non-empty');
  else if (bytes(name) > 63) errs.push(`name part ${maxLen(63)}`);
  if (!QNAME.test(name)) errs.push(`name part ${regexError(QNAME_MSG, QNAME_FMT, 'MyName', 'my.name', '123-abc')}`);
  return errs;
}

/** kube's IsValidLabelValue: the problems, empty when valid. */
export function labelValueErrors(value: string): string[] {
  const errs: string[] = [];
  if (bytes(value) > 63) errs.push(maxLen(63));
  if (!LABEL_VALUE.test(value)) errs.push(regexError(LABEL_VALUE_MSG, LABEL_VALUE_FMT, 'MyValue', 'my_value', '12345'));
  return errs;
}

/** field.Invalid(path, value, detail).Error(). */
const invalid = (path: string, value: string, detail: string): string => `${path}: Invalid value: ${goQuote(value)}: ${detail}`;

/** utilerrors.NewAggregate(...).Error(): one message as is, several as `[a, b]` (duplicates dropped). */
function aggregate(msgs: string[]): string {
  const uniq = [...new Set(msgs)];
  return uniq.length === 1 ? (uniq[0] ?? '') : `[${uniq.join(', ')}]`;
}

// ---- the lexer and parser of kube's label selector syntax (k8s.io/apimachinery/pkg/labels) ----

type Tok = 'eos' | ')' | ',' | '!' | '==' | '=' | '>' | 'id' | 'in' | '<' | '!=' | 'notin' | '(' | 'error';
interface Item {
  tok: Tok;
  lit: string;
}
const SYMBOLS: ReadonlySet<string> = new Set([')', ',', '!', '==', '=', '>', '<', '!=', '(']);
const isSpecial = (c: string): boolean => '=!(),><'.includes(c);
const isSpace = (c: string): boolean => c === ' ' || c === '\t' || c === '\r' || c === '\n';

function lex(s: string): Item[] {
  const items: Item[] = [];
  let i = 0;
  for (;;) {
    while (i < s.length && isSpace(s[i] ?? '')) i++;
    if (i >= s.length) {
      items.push({ tok: 'eos', lit: '' });
      return items;
    }
    if (isSpecial(s[i] ?? '')) {
      // the longest run of special characters that is a symbol
      let buf = '';
      let last: Item | undefined;
      while (i < s.length && isSpecial(s[i] ?? '')) {
        const next = buf + (s[i] ?? '');
        if (SYMBOLS.has(next)) {
          buf = next;
          last = { tok: next as Tok, lit: next };
          i++;
        } else if (last !== undefined) break;
        else {
          buf = next;
          i++;
        }
      }
      items.push(last ?? { tok: 'error', lit: `error expected: keyword found '${buf}'` });
      continue;
    }
    let j = i;
    while (j < s.length && !isSpecial(s[j] ?? '') && !isSpace(s[j] ?? '')) j++;
    const lit = s.slice(i, j);
    i = j;
    items.push({ tok: lit === 'in' ? 'in' : lit === 'notin' ? 'notin' : 'id', lit });
  }
}

class SelectorSyntaxError extends Error {}

class LabelParser {
  private pos = 0;
  constructor(private readonly items: Item[]) {}

  /** In a values context the keywords `in` and `notin` are identifiers. */
  private look(values: boolean): Item {
    const it = this.items[this.pos] ?? { tok: 'eos', lit: '' };
    return values && (it.tok === 'in' || it.tok === 'notin') ? { tok: 'id', lit: it.lit } : it;
  }
  private take(values: boolean): Item {
    const it = this.look(values);
    if (this.pos < this.items.length - 1) this.pos++;
    return it;
  }

  parse(): LabelSelector {
    const out: LabelSelector = [];
    for (;;) {
      const { tok, lit } = this.look(true);
      if (tok === 'eos') return out;
      if (tok !== 'id' && tok !== '!') throw new SelectorSyntaxError(`found '${lit}', expected: !, identifier, or 'end of string'`);
      let r: LabelRequirement;
      try {
        r = this.requirement();
      } catch (e) {
        if (e instanceof SelectorSyntaxError) throw new SelectorSyntaxError(`unable to parse requirement: ${e.message}`);
        throw e;
      }
      out.push(r);
      const t = this.take(true);
      if (t.tok === 'eos') return out;
      if (t.tok !== ',') throw new SelectorSyntaxError(`found '${t.lit}', expected: ',' or 'end of string'`);
      const n = this.look(true);
      if (n.tok !== 'id' && n.tok !== '!') throw new SelectorSyntaxError(`found '${n.lit}', expected: identifier after ','`);
    }
  }

  private requirement(): LabelRequirement {
    let op: LabelRequirement['op'] | undefined;
    let t = this.take(true);
    if (t.tok === '!') {
      op = '!';
      t = this.take(true);
    }
    if (t.tok !== 'id') throw new SelectorSyntaxError(`found '${t.lit}', expected: identifier`);
    const key = t.lit;
    const keyErrs = labelKeyErrors(key);
    if (keyErrs.length > 0) throw new SelectorSyntaxError(invalid('<nil>', key, keyErrs.join('; ')));
    const n = this.look(true).tok;
    if (op === '!' || n === 'eos' || n === ',') return requirement(key, op ?? 'exists', []);
    const o = this.take(false);
    const ops: Partial<Record<Tok, LabelRequirement['op']>> = {
      in: 'in',
      notin: 'notin',
      '=': '=',
      '==': '=',
      '!=': '!=',
      '>': 'gt',
      '<': 'lt',
    };
    op = ops[o.tok];
    if (op === undefined) throw new SelectorSyntaxError(`found '${o.lit}', expected: in, notin, =, ==, !=, gt, lt`);
    return requirement(key, op, op === 'in' || op === 'notin' ? this.values() : this.exactValue());
  }

  private values(): string[] {
    const open = this.take(true);
    if (open.tok !== '(') throw new SelectorSyntaxError(`found '${open.lit}' expected: '('`);
    const { tok, lit } = this.look(true);
    if (tok === ')') {
      this.take(true);
      return [''];
    }
    if (tok !== 'id' && tok !== ',') throw new SelectorSyntaxError(`found '${lit}', expected: ',', ')' or identifier`);
    const set = this.identifiers();
    if (this.take(true).tok !== ')') throw new SelectorSyntaxError(`found '${lit}', expected: ')'`);
    return set;
  }

  private identifiers(): string[] {
    const set = new Set<string>();
    for (;;) {
      const t = this.take(true);
      if (t.tok === 'id') {
        set.add(t.lit);
        const n = this.look(true);
        if (n.tok === ',') continue;
        if (n.tok === ')') return [...set];
        throw new SelectorSyntaxError(`found '${n.lit}', expected: ',' or ')'`);
      }
      if (t.tok === ',') {
        if (set.size === 0) set.add('');
        const n = this.look(true).tok;
        if (n === ')') {
          set.add('');
          return [...set];
        }
        if (n === ',') set.add('');
        continue;
      }
      throw new SelectorSyntaxError(`found '${t.lit}', expected: ',', or identifier`);
    }
  }

  private exactValue(): string[] {
    const n = this.look(true).tok;
    if (n === 'eos' || n === ',') return [''];
    const t = this.take(true);
    if (t.tok === 'id') return [t.lit];
    throw new SelectorSyntaxError(`found '${t.lit}', expected: identifier`);
  }
}

/** Go byte order for the (sorted, deduplicated) value set kube builds. */
const byBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
function isInt64(v: string): boolean {
  if (!/^[+-]?[0-9]+$/.test(v)) return false;
  const n = BigInt(v);
  return n >= INT64_MIN && n <= INT64_MAX;
}

/** kube's NewRequirement checks of the values (the key was checked by the parser). */
function requirement(key: string, op: LabelRequirement['op'], raw: string[]): LabelRequirement {
  const values = [...new Set(raw)].sort(byBytes);
  const errs: string[] = [];
  if (op === 'gt' || op === 'lt')
    values.forEach((v, i) => {
      if (!isInt64(v)) errs.push(invalid(`values[${i}]`, v, "for 'Gt', 'Lt' operators, the value must be an integer"));
    });
  values.forEach((v, i) => {
    const e = labelValueErrors(v);
    if (e.length > 0) errs.push(invalid(`values[${i}][${key}]`, v, e.join('; ')));
  });
  if (errs.length > 0) throw new SelectorSyntaxError(aggregate(errs));
  return { key, op, values };
}

/**
 * Parse a label selector in the Kubernetes string syntax (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
 * `a notin (x)`, `a`, `!a`, `a>1`, `a<1`) exactly as kube-apiserver does: the same grammar, key and
 * value validation, and error messages (e.g. `unable to parse requirement: values[0][app]:
 * Invalid value: "…": must be no more than 63 characters`). Requirements keep their input order
 * (kube sorts them by key; matching does not depend on order); values are deduplicated and sorted.
 *
 * Throws only an ApiError 400 (BadRequest) with kube's message; never anything else.
 * Differs from kube in one corner: a NUL character is an ordinary (invalid) character here, where
 * kube's lexer stops at it.
 */
export function parseLabelSelector(s: string): LabelSelector {
  try {
    return new LabelParser(lex(s)).parse();
  } catch (e) {
    if (e instanceof SelectorSyntaxError) throw badRequest(e.message);
    throw badRequest(`unable to parse requirement: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** The string form of a parsed selector (kube's Requirement.String, joined by `,`); parses back to the same requirements. */
export function formatLabelSelector(sel: LabelSelector): string {
  return sel
    .map((r) => {
      switch (r.op) {
        case 'exists':
          return r.key;
        case '!':
          return `!${r.key}`;
        case 'in':
        case 'notin':
          return `${r.key} ${r.op} (${r.values.join(',')})`;
        case 'gt':
          return `${r.key}>${r.values[0] ?? ''}`;
        case 'lt':
          return `${r.key}<${r.values[0] ?? ''}`;
        default:
          return `${r.key}${r.op}${r.values[0] ?? ''}`;
      }
    })
    .join(',');
}

/** A `metav1.LabelSelector` object: `matchLabels` and `matchExpressions`, all of which must hold. */
export interface LabelSelectorObject {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

const OPERATORS: Record<string, LabelRequirement['op']> = { In: 'in', NotIn: 'notin', Exists: 'exists', DoesNotExist: '!' };

/**
 * The requirements of a selector object, for {@link matchesLabels}; undefined when an expression has
 * an operator kube does not know (kube refuses to convert such a selector, so it matches nothing).
 */
export function labelSelectorFromObject(sel: LabelSelectorObject): LabelSelector | undefined {
  const out: LabelSelector = Object.entries(sel.matchLabels ?? {}).map(([key, v]) => ({ key, op: '=', values: [v] }));
  for (const e of sel.matchExpressions ?? []) {
    const op = Object.prototype.hasOwnProperty.call(OPERATORS, e.operator) ? OPERATORS[e.operator] : undefined;
    if (op === undefined) return undefined;
    out.push({ key: e.key, op, values: e.values ?? [] });
  }
  return out;
}

/** True when the labels satisfy every requirement of the selector. */
export function matchesLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const r of sel) {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case '=':
        if (!has || v !== r.values[0]) return false;
        break;
      case '!=':
        if (has && v === r.values[0]) return false;
        break;
      case 'in':
        if (!has || !r.values.includes(v ?? '')) return false;
        break;
      case 'notin':
        if (has && r.values.includes(v ?? '')) return false;
        break;
      case 'exists':
        if (!has) return false;
        break;
      case '!':
        if (has) return false;
        break;
      case 'gt':
      case 'lt': {
        // kube: both sides as int64; a label that is not an integer does not match
        if (!has || !isInt64(v ?? '') || !isInt64(r.values[0] ?? '')) return false;
        const a = BigInt(v ?? '');
        const b = BigInt(r.values[0] ?? '');
        if (r.op === 'gt' ? !(a > b) : !(a < b)) return false;
        break;
      }
    }
  }
  return true;
}

/** One requirement of a field selector: `path=value` or `path!=value`. */
export interface FieldRequirement {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** Split on commas not escaped by a backslash (kube's splitTerms). */
function splitFieldTerms(s: string): string[] {
  if (s === '') return [];
  const terms: string[] = [];
  let start = 0;
  let slash = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (slash) slash = false;
    else if (c === '\\') slash = true;
    else if (c === ',') {
      terms.push(s.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(s.slice(start));
  return terms;
}

/** kube's UnescapeValue: `\\`, `\,` and `\=` are escapes; any other escape or a bare `,`/`=` is an error. */
function unescapeFieldValue(s: string): string {
  let out = '';
  let slash = false;
  for (const c of s) {
    if (slash) {
      if (c !== '\\' && c !== ',' && c !== '=') throw badRequest(`invalid field selector: invalid escape sequence: \\${c}`);
      out += c;
      slash = false;
    } else if (c === '\\') slash = true;
    else if (c === ',' || c === '=') throw badRequest(`invalid field selector: unescaped character in value: ${c.codePointAt(0) ?? 0}`);
    else out += c;
  }
  if (slash) throw badRequest('invalid field selector: invalid escape sequence: \\');
  return out;
}

/**
 * Parse a field selector (`metadata.name=x,metadata.namespace!=y`) as kube's fields.ParseSelector
 * does: terms split on unescaped commas, empty terms skipped, each split at its first `!=`, `==`
 * or `=`, no trimming; the value unescaped (`\,`, `\=`, `\\`). Throws only an ApiError 400 with
 * kube's message (`invalid selector: '…'; can't understand '…'`, `invalid field selector: …`).
 * Terms keep their input order (kube sorts them; matching does not depend on order).
 */
export function parseFieldSelector(s: string): FieldRequirement[] {
  const out: FieldRequirement[] = [];
  for (const part of splitFieldTerms(s)) {
    if (part === '') continue;
    let at = -1;
    let op: '!=' | '==' | '=' = '=';
    for (let i = 0; i < part.length && at < 0; i++)
      for (const o of ['!=', '==', '='] as const)
        if (part.startsWith(o, i)) {
          at = i;
          op = o;
          break;
        }
    if (at < 0) throw badRequest(`invalid selector: '${s}'; can't understand '${part}'`);
    out.push({ field: part.slice(0, at), op: op === '!=' ? '!=' : '=', value: unescapeFieldValue(part.slice(at + op.length)) });
  }
  return out;
}

/** The string form of field requirements, values escaped; parses back to the same requirements. */
export function formatFieldSelector(reqs: FieldRequirement[]): string {
  return reqs.map((r) => `${r.field}${r.op}${r.value.replace(/[\\,=]/g, (c) => `\\${c}`)}`).join(',');
}

/** True when every field requirement holds, reading values with `get`. */
export function matchesFields(reqs: FieldRequirement[], get: (field: string) => string | undefined): boolean {
  for (const r of reqs) {
    const v = get(r.field) ?? '';
    if (r.op === '=' ? v !== r.value : v === r.value) return false;
  }
  return true;
}
