import { createHash } from 'node:crypto';
import { parse as yamlParse, stringify as yamlStringify } from 'yaml';
import { send, WatchStream } from './client.js';
import type { Credential, RawResponse } from './client.js';
import { normaliseTranscript } from './normalise.js';
import type { Identity, RequestStep, Scenario, Step, StepResult, Transcript } from './types.js';

/** A server the suite talks to: its URL, the CA to trust, and the admin's credential. */
export interface Target {
  name: string;
  url: string;
  ca: string;
  admin: Credential;
}

/** The headers compared (besides status and body); everything else a server sends is ignored. */
export const COMPARED_HEADERS = ['content-type', 'warning'] as const;

/** The fresh namespace a scenario runs in: the same name on both servers. */
export function namespaceFor(id: string): string {
  const slug = id
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 40)
    .replace(/-$/, '');
  return `d-${slug}-${createHash('sha256').update(id).digest('hex').slice(0, 6)}`;
}

type Vars = Record<string, string>;

function fill(s: string, vars: Vars): string {
  return s.replace(/\{\{(\w+)\}\}/g, (m, k: string) => {
    const v = vars[k];
    if (v === undefined) throw new Error(`no value saved for {{${k}}}`);
    return v;
  });
}

function fillDeep(v: unknown, vars: Vars): unknown {
  if (typeof v === 'string') return fill(v, vars);
  if (Array.isArray(v)) return v.map((x) => fillDeep(x, vars));
  if (typeof v === 'object' && v !== null && !Buffer.isBuffer(v)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [fill(k, vars), fillDeep(x, vars)]));
  }
  return v;
}

/** The value at a dotted path; a key that itself holds dots (`definitions.com.x.Kind`) is found too. */
function dig(v: unknown, path: string): unknown {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  if (path in o) return o[path];
  for (let i = path.indexOf('.'); i > 0; i = path.indexOf('.', i + 1)) {
    const key = path.slice(0, i);
    if (key in o) {
      const found = dig(o[key], path.slice(i + 1));
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

function headerText(v: string | string[] | undefined): string | undefined {
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * The body as a value: JSON parsed; a YAML answer (`Content-Type: application/yaml`) as the document
 * it encodes, under `$yaml` (so its uids, times and resourceVersions are normalised like JSON's, and
 * its content compared; its layout is not); anything else as text.
 */
function parseBody(res: RawResponse): unknown {
  const text = res.body.toString('utf8');
  if (text === '') return '';
  const ct = headerText(res.headers['content-type']) ?? '';
  if (ct.startsWith('application/yaml')) {
    try {
      return { $yaml: yamlParse(text) as unknown };
    } catch {
      return text;
    }
  }
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs scenarios against one target, in order, each in its own fresh namespace. */
export class ScenarioRunner {
  private readonly tokens = new Map<string, string>();

  constructor(readonly target: Target) {}

  private async credential(as: Identity | undefined, ns: string): Promise<Credential> {
    const t = this.target;
    if (as === undefined || as === 'admin') return t.admin;
    if (as === 'none') return { ca: t.ca };
    if (as === 'badtoken') return { ca: t.ca, token: 'not-a-valid-token-at-all' };
    const saNs = as.namespace ?? ns;
    const key = `${saNs}/${as.serviceAccount}`;
    let token = this.tokens.get(key);
    if (token === undefined) {
      const r = await send({
        method: 'POST',
        url: `${t.url}/api/v1/namespaces/${saNs}/serviceaccounts/${as.serviceAccount}/token`,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: Buffer.from(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} })),
        cred: t.admin,
      });
      if (r.status !== 201) throw new Error(`${t.name}: TokenRequest for ${key}: ${r.status} ${r.body.toString()}`);
      token = (JSON.parse(r.body.toString()) as { status: { token: string } }).status.token;
      this.tokens.set(key, token);
    }
    return { ca: t.ca, token };
  }

  /** One request step, as it would be sent: body encoding and headers. */
  private async request(step: RequestStep, vars: Vars, ns: string): Promise<RawResponse> {
    const headers: Record<string, string> = { accept: step.accept ?? 'application/json' };
    let body: Buffer | undefined;
    if (step.body !== undefined) {
      const ct = step.contentType ?? 'application/json';
      headers['content-type'] = ct;
      if (Buffer.isBuffer(step.body)) body = step.body;
      else if (typeof step.body === 'string') body = Buffer.from(fill(step.body, vars));
      else {
        const filled = fillDeep(step.body, vars);
        body = Buffer.from(ct.includes('yaml') ? yamlStringify(filled) : JSON.stringify(filled));
      }
    }
    for (const [k, v] of Object.entries(step.headers ?? {})) headers[k.toLowerCase()] = fill(v, vars);
    return send({
      method: step.method ?? 'GET',
      url: this.target.url + fill(step.path, vars),
      headers,
      ...(body !== undefined ? { body } : {}),
      cred: await this.credential(step.as, ns),
    });
  }

  private async ensureNamespace(ns: string): Promise<void> {
    const r = await send({
      method: 'POST',
      url: `${this.target.url}/api/v1/namespaces`,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: Buffer.from(JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })),
      cred: this.target.admin,
    });
    if (r.status !== 201 && r.status !== 409)
      throw new Error(`${this.target.name}: creating namespace ${ns}: ${r.status} ${r.body.toString()}`);
  }

  /** Run one scenario; the answers come back normalised. */
  async run(scenario: Scenario): Promise<Transcript> {
    const ns = scenario.noNamespace ? '' : namespaceFor(scenario.id);
    if (ns) await this.ensureNamespace(ns);
    const vars: Vars = { ns };
    const watches = new Map<string, WatchStream>();
    const results: StepResult[] = [];
    try {
      for (const [i, step] of scenario.steps.entries()) {
        const r = await this.step(step, i, vars, ns, watches);
        if (r) results.push(r);
      }
    } finally {
      for (const w of watches.values()) w.close();
    }
    return { id: scenario.id, results: normaliseTranscript(results, ns) };
  }

  private async step(step: Step, i: number, vars: Vars, ns: string, watches: Map<string, WatchStream>): Promise<StepResult | undefined> {
    if (step.kind === 'watch') {
      const w = new WatchStream({
        method: 'GET',
        url: this.target.url + fill(step.path, vars),
        headers: { accept: 'application/json' },
        cred: await this.credential(step.as, ns),
      });
      await w.ready;
      watches.set(step.id, w);
      return undefined;
    }
    if (step.kind === 'read') {
      const w = watches.get(step.id);
      if (!w) throw new Error(`read of watch ${step.id} before it was opened`);
      const counted = (): unknown[] => w.events.filter((e) => !isPeriodicBookmark(e));
      const end =
        w.status !== 200
          ? 'closed'
          : await w.waitFor(() => step.events !== undefined && counted().length >= step.events, step.timeoutMs ?? 10_000);
      if (step.close !== false) {
        w.close();
        watches.delete(step.id);
      }
      const events = counted()
        .slice(0, step.events ?? Infinity)
        .map(markBookmark);
      return {
        step: i,
        status: w.status,
        headers: pickHeaders(w.headers),
        ...(w.status === 200 ? { events, end } : { body: safeJson(w.body) }),
        ...(w.error ? { error: w.error } : {}),
      };
    }
    const deadline = Date.now() + (step.until?.timeoutMs ?? 30_000);
    let res = await this.request(step, vars, ns);
    while (step.until && res.status !== step.until.status && Date.now() < deadline) {
      await wait(100);
      res = await this.request(step, vars, ns);
    }
    const parsed = parseBody(res);
    const body = step.pick !== undefined && typeof parsed === 'object' ? (dig(parsed, step.pick) ?? null) : parsed;
    for (const [name, path] of Object.entries(step.save ?? {})) {
      const v = dig(parsed, path);
      if (v !== undefined) vars[name] = String(v);
    }
    if (step.setup) {
      if (res.status >= 300)
        throw new Error(
          `${this.target.name}: setup step ${i} (${step.method ?? 'GET'} ${step.path}): ${res.status} ${res.body.toString().slice(0, 500)}`,
        );
      return undefined;
    }
    const mode = step.compare ?? 'full';
    if (mode === 'outcome') return { step: i, outcome: res.status < 300 ? 'accepted' : 'refused' };
    if (mode === 'status') return { step: i, status: res.status };
    return { step: i, status: res.status, headers: pickHeaders(res.headers), body };
  }
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

function pickHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of COMPARED_HEADERS) {
    const v = headerText(h[k]);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

function bookmarkAnnotations(e: unknown): Record<string, string> | undefined {
  const ev = e as { type?: string; object?: { metadata?: { annotations?: Record<string, string> } } };
  return ev.type === 'BOOKMARK' ? (ev.object?.metadata?.annotations ?? {}) : undefined;
}

/** A BOOKMARK sent on the server's own clock (not the initial-events-end one): not compared. */
function isPeriodicBookmark(e: unknown): boolean {
  const a = bookmarkAnnotations(e);
  return a !== undefined && a[INITIAL_EVENTS_END] !== 'true';
}

/** A bookmark's resourceVersion is "now" on its server: only its presence counts. */
function markBookmark(e: unknown): unknown {
  if (bookmarkAnnotations(e) === undefined) return e;
  const ev = structuredClone(e) as { object: { metadata: { resourceVersion?: string } } };
  ev.object.metadata.resourceVersion = '$BOOKMARKRV';
  return ev;
}
