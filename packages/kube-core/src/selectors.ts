import { badRequest } from './errors.js';

/** One requirement of a label selector, e.g. `tier in (a,b)` or `!legacy`. */
export interface LabelRequirement {
  key: string;
  op: '=' | '!=' | 'in' | 'notin' | 'exists' | '!';
  values: string[];
}

/** A parsed label selector: every requirement must hold. */
export type LabelSelector = LabelRequirement[];

const KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Split on commas that are not inside parentheses. */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

/**
 * Parse a label selector in the Kubernetes string syntax
 * (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`).
 * Throws a 400 ApiError naming the bad term.
 */
export function parseLabelSelector(s: string): LabelSelector {
  const out: LabelSelector = [];
  for (const term of splitTopLevel(s)) {
    let m: RegExpMatchArray | null;
    if ((m = term.match(/^(\S+)\s+(in|notin)\s*\((.*)\)$/))) {
      const values = (m[3] ?? '')
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '');
      out.push({ key: check(m[1] ?? '', term), op: m[2] as 'in' | 'notin', values });
    } else if ((m = term.match(/^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/))) {
      const op = m[2] === '!=' ? '!=' : '=';
      out.push({ key: check(m[1] ?? '', term), op, values: [m[3] ?? ''] });
    } else if ((m = term.match(/^!\s*(\S+)$/))) {
      out.push({ key: check(m[1] ?? '', term), op: '!', values: [] });
    } else if ((m = term.match(/^(\S+)$/))) {
      out.push({ key: check(m[1] ?? '', term), op: 'exists', values: [] });
    } else {
      throw badRequest(`unable to parse requirement: "${term}"`);
    }
  }
  return out;
}

function check(key: string, term: string): string {
  if (!KEY.test(key) || key.length > 317) throw badRequest(`invalid label key "${key}" in selector term "${term}"`);
  return key;
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

/** Parse a field selector (`metadata.name=x,metadata.namespace!=y`). */
export function parseFieldSelector(s: string): FieldRequirement[] {
  return splitTopLevel(s).map((term) => {
    const m = term.match(/^([^=!]+)(==|=|!=)(.*)$/);
    if (!m) throw badRequest(`invalid field selector term "${term}"`);
    return { field: (m[1] ?? '').trim(), op: m[2] === '!=' ? '!=' : '=', value: (m[3] ?? '').trim() };
  });
}

/** True when every field requirement holds, reading values with `get`. */
export function matchesFields(reqs: FieldRequirement[], get: (field: string) => string | undefined): boolean {
  for (const r of reqs) {
    const v = get(r.field) ?? '';
    if (r.op === '=' ? v !== r.value : v === r.value) return false;
  }
  return true;
}
