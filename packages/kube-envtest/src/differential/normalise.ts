import type { StepResult } from './types.js';

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g;
const TIME = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})/g;
const JWT = /\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g;
/** An allocated cluster IP (IPv4 or IPv6; not "None" or ""). */
const ALLOCATED_IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)$/;
const RECORD_RV = /ResourceVersion in record \((\d+)\)/g;
const PEM = /-----BEGIN [A-Z ]+-----[\s\S]*?-----END [A-Z ]+-----\n?/g;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A list answer: a List, or a Table (its rows are the list's items). */
const isList = (o: Obj): boolean =>
  Array.isArray(o['items']) || (typeof o['kind'] === 'string' && (o['kind'].endsWith('List') || o['kind'] === 'Table'));

function walk(v: unknown, f: (o: Obj) => void): void {
  if (Array.isArray(v)) for (const x of v) walk(x, f);
  else if (isObj(v)) {
    f(v);
    for (const x of Object.values(v)) walk(x, f);
  }
}

function rvOf(o: Obj): string | undefined {
  const m = o['metadata'];
  return isObj(m) && typeof m['resourceVersion'] === 'string' && m['resourceVersion'] !== '' ? m['resourceVersion'] : undefined;
}

/**
 * A Table's elapsed-time cells, in place on the normalised copy: the Age column and any column of
 * type `date` render a timestamp relative to when the answer was made ("0s", "1s"), so they differ
 * with the wall clock as the timestamps do. A string cell becomes `$AGE`; null and other values stay.
 */
function ageCells(body: unknown): void {
  if (!isObj(body) || body['kind'] !== 'Table' || !Array.isArray(body['columnDefinitions']) || !Array.isArray(body['rows'])) return;
  const idx = body['columnDefinitions'].flatMap((c, i) => (isObj(c) && (c['type'] === 'date' || c['name'] === 'Age') ? [i] : []));
  for (const row of body['rows']) {
    const cells = isObj(row) ? row['cells'] : undefined;
    if (Array.isArray(cells)) for (const i of idx) if (typeof cells[i] === 'string') cells[i] = '$AGE';
  }
}

/**
 * Normalise one scenario's answers in place of what must differ between two servers and nothing
 * else: uids (numbered by first appearance, members of an object visited in key order), timestamps, object resourceVersions (replaced by their
 * rank among the scenario's object resourceVersions, so order and equality still count), a list's
 * resourceVersion (only whether it is at least its items'; a Table's is a list's, its rows its items), continue tokens, generated names,
 * tokens and certificates, the scenario's namespace name, the stored resourceVersion a precondition conflict quotes, a Table's Age cells, and allocated Service addresses (an IP in
 * `clusterIP` or `clusterIPs`, numbered by first appearance, so equality still counts: kube-apiserver
 * picks them at random).
 */
export function normaliseTranscript(results: StepResult[], ns: string): StepResult[] {
  const payloads = results.flatMap((r) => [r.body, ...(r.events ?? [])]);
  // Object resourceVersions, ranked.
  const objectRvs = new Set<string>();
  const generated = new Map<string, string>();
  walk(payloads, (o) => {
    const meta = o['metadata'];
    if (!isObj(meta)) return;
    const rv = rvOf(o);
    if (rv !== undefined && !isList(o) && /^\d+$/.test(rv)) objectRvs.add(rv);
    if (typeof meta['generateName'] === 'string' && typeof meta['name'] === 'string' && meta['name'].startsWith(meta['generateName'])) {
      if (!generated.has(meta['name'])) generated.set(meta['name'], `${meta['generateName']}$GEN${generated.size + 1}`);
    }
  });
  const ranked = [...objectRvs].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
  const rank = new Map(ranked.map((rv, i) => [rv, `RV${i + 1}`]));
  const uids = new Map<string, string>();
  const ips = new Map<string, string>();
  const ip = (v: string): string => {
    if (!ALLOCATED_IP.test(v)) return v;
    if (!ips.has(v)) ips.set(v, `$IP${ips.size + 1}`);
    return ips.get(v)!;
  };
  const nsRe = new RegExp(`\\b${ns.replace(/[-.]/g, '\\$&')}\\b`, 'g');

  const str = (s: string): string => {
    let out = s
      .replace(PEM, '$PEM')
      .replace(JWT, '$JWT')
      .replace(TIME, '$TIME')
      // A precondition conflict quotes the stored resourceVersion: ranked like the objects' own.
      .replace(RECORD_RV, (_m, rv: string) => `ResourceVersion in record (${rank.get(rv) ?? '$RV'})`)
      .replace(UUID, (u) => {
        if (!uids.has(u)) uids.set(u, `UID${uids.size + 1}`);
        return uids.get(u)!;
      });
    if (ns) out = out.replace(nsRe, '$NS');
    for (const [name, gen] of generated) out = out.split(name).join(gen);
    return out;
  };

  const norm = (v: unknown, key: string | undefined, parent: Obj | undefined): unknown => {
    if (typeof v === 'string') {
      if (key === 'resourceVersion' && parent !== undefined) return v;
      if (key === 'continue' && v !== '') return '$CONTINUE';
      if (key === 'token' && v.length > 20) return '$TOKEN';
      if (key === 'clusterIP' || key === 'clusterIPs[]') return ip(v);
      return str(v);
    }
    if (Array.isArray(v)) return v.map((x) => norm(x, key === 'clusterIPs' ? 'clusterIPs[]' : undefined, undefined));
    if (!isObj(v)) return v;
    const out: Obj = {};
    // Keys in sorted order: uids are numbered by first appearance, and the order of an object's
    // members carries no meaning (kube and kars write them in different orders).
    for (const [k, x] of Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) out[str(k)] = norm(x, k, v) as Json;
    const meta = out['metadata'];
    const rv = rvOf(v);
    if (isObj(meta) && rv !== undefined) {
      if (isList(v)) {
        let max = 0n;
        walk(v['items'] ?? v['rows'], (o) => {
          const r = rvOf(o);
          if (r !== undefined && /^\d+$/.test(r) && BigInt(r) > max) max = BigInt(r);
        });
        meta['resourceVersion'] = /^\d+$/.test(rv) && BigInt(rv) >= max ? '$LISTRV' : `$LISTRV-BELOW-ITEMS(${rv})`;
      } else meta['resourceVersion'] = rank.get(rv) ?? '$RV';
    }
    return out;
  };

  return results.map((r) => {
    const out: StepResult = { ...r };
    if (r.body !== undefined) {
      out.body = norm(r.body, undefined, undefined);
      ageCells(out.body);
    }
    if (r.events !== undefined) out.events = r.events.map((e) => norm(e, undefined, undefined));
    if (r.headers !== undefined) out.headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, str(v)]));
    return out;
  });
}
