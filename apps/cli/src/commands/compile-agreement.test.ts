/**
 * Admission once: `kars compile` (policy-compiler's compileDocuments) and `kars apiserver` must
 * decide the same for the same document — the same unknown fields (kubectl's strict errors and
 * warnings), the same schema and CEL causes, and the same defaulted object (so the same digests).
 * Both call kube-schema's admit(); this test holds them to it end to end: the apiserver over real
 * HTTP with the kars CRDs installed, the compiler in process and as the `kars compile` process.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { createCrds, startTestServer, warningTexts, type TestServer } from '@kars/apiserver/testing';
import { admit, compileSchema } from '@kars/kube-schema';
import { egressApprovalCrd, inferencePolicyCrd, karsSandboxCrd, toolPolicyCrd } from '@kars/policy-api';
import { compileDocuments, type CompileDocumentsResult } from '@kars/policy-compiler';

const NOW = '2026-05-14T19:00:00Z';
const V = 'kars.azure.com/v1alpha1';
const NS = 'default';
const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
const PLURAL: Record<string, string> = {
  InferencePolicy: 'inferencepolicies',
  ToolPolicy: 'toolpolicies',
  EgressApproval: 'egressapprovals',
  KarsSandbox: 'karssandboxes',
};
const UNKNOWN = 'unknown field';

type Doc = { apiVersion: string; kind: string; metadata: { name: string; [k: string]: unknown }; [k: string]: unknown };

/** What the apiserver decided about one document. */
interface ServerVerdict {
  /** From `fieldValidation=Strict`: the 400's message when refused for unknown fields. */
  strictMessage: string | undefined;
  /** From `fieldValidation=Warn`: the status and the unknown-field warnings (their text). */
  status: number;
  warnings: string[];
  /** 422 causes (field, message), in order. */
  causes: Array<[string, string]>;
  /** The object as stored (status 201). */
  stored?: Doc;
}

function parseWarnings(header: string | string[] | undefined): string[] {
  const text = Array.isArray(header) ? header.join(', ') : (header ?? '');
  assert.match(text, /^[\x20-\x7e]*$/, 'warning headers are ASCII');
  return warningTexts(text);
}

async function serverAdmit(ts: TestServer, doc: Doc): Promise<ServerVerdict> {
  const path = `/apis/kars.azure.com/v1alpha1/namespaces/${NS}/${PLURAL[doc.kind] ?? 'unknown'}`;
  const strict = await ts.client.request('POST', `${path}?fieldValidation=Strict&dryRun=All`, doc);
  // kube-apiserver (and kars apiserver) prefix a custom resource's strict error with the GVK it could not decode.
  const strictText = strict.status === 400 && typeof strict.body?.message === 'string' ? (strict.body.message as string) : '';
  const strictMatch = /^\S+ in version "[^"]+" cannot be handled as a \S+: (strict decoding error:.*)$/s.exec(strictText);
  const strictMessage = strictMatch ? strictMatch[1] : undefined;
  const warn = await ts.client.request('POST', `${path}?fieldValidation=Warn`, doc);
  const causes: Array<[string, string]> =
    warn.status === 422
      ? // The server prints the root's nil field path as kube does (`<nil>`); kars compile names it "".
        (warn.body?.details?.causes ?? []).map((c: { field?: string; message?: string }) => [
          c.field === '<nil>' ? '' : (c.field ?? ''),
          c.message ?? '',
        ])
      : [];
  assert.ok([201, 422].includes(warn.status), `Warn create of ${doc.metadata.name}: ${warn.status} ${warn.text}`);
  return {
    strictMessage,
    status: warn.status,
    warnings: parseWarnings(warn.headers['warning']).filter((w) => w.startsWith(UNKNOWN)),
    causes,
    ...(warn.status === 201 ? { stored: warn.body as Doc } : {}),
  };
}

/** compileDocuments' verdict split as the server's: unknown fields, schema/CEL causes, everything else. */
function compileVerdict(r: CompileDocumentsResult): { unknown: string[]; other: Array<[string, string]> } {
  const unknown = r.errors.filter((e) => e.message.startsWith(UNKNOWN)).map((e) => e.field);
  const other = r.errors.filter((e) => !e.message.startsWith(UNKNOWN)).map((e): [string, string] => [e.field, e.message]);
  return { unknown, other };
}

/** The stored object as a document again: only what an author writes (no server-owned metadata). */
function asAuthored(stored: Doc): Doc {
  const { apiVersion, kind, metadata, ...rest } = stored;
  const out: Doc = { apiVersion, kind, metadata: { name: metadata.name, namespace: NS }, ...rest };
  delete out['status'];
  return out;
}

/** Check one document: server (Strict + Warn) against the compiler, and the stored object against admit(). */
async function agree(ts: TestServer, doc: Doc): Promise<void> {
  const what = `${doc.kind} ${doc.metadata.name}: ${JSON.stringify(doc)}`;
  const server = await serverAdmit(ts, doc);
  const compiled = compileDocuments([doc], { now: NOW, namespace: NS });
  const mine = compileVerdict(compiled);

  // Unknown fields: one list, whether refused (Strict), warned (Warn) or reported by kars compile.
  const named = mine.unknown.map((p) => `${UNKNOWN} "${p}"`);
  assert.equal(
    server.strictMessage,
    named.length > 0 ? `strict decoding error: ${named.join(', ')}` : undefined,
    `unknown fields (Strict) ${what}`,
  );
  if (server.status === 201) assert.deepEqual(server.warnings, named, `unknown fields (Warn warnings) ${what}`);

  if (server.status === 422) {
    // The compiler stops after admission when it fails, so its other errors are exactly the causes.
    assert.deepEqual(mine.other, server.causes, `schema/CEL causes ${what}`);
    return;
  }
  const stored = server.stored;
  assert.ok(stored, what);
  // The object the server stored is the object admit() makes (prune + default), field for field.
  const crd = {
    InferencePolicy: inferencePolicyCrd,
    ToolPolicy: toolPolicyCrd,
    EgressApproval: egressApprovalCrd,
    KarsSandbox: karsSandboxCrd,
  }[doc.kind as 'InferencePolicy']();
  const local = admit(compileSchema(crd.spec.versions[0].schema.openAPIV3Schema), structuredClone(doc) as Record<string, unknown>);
  assert.deepEqual(stored['spec'], local.object['spec'], `stored spec = admit() spec ${what}`);
  // No schema causes on either side; whatever else the compiler says (semantic validation, digests)
  // it says the same about the document and about what the server stored.
  const again = compileDocuments([asAuthored(stored)], { now: NOW, namespace: NS });
  assert.deepEqual(compileVerdict(again).unknown, [], `the stored object has no unknown fields ${what}`);
  if (mine.unknown.length > 0) {
    // kars compile refuses unknown fields (kubectl's strict default); the server, told Warn, dropped them.
    assert.deepEqual(mine.other, [], `no other error besides the unknown fields ${what}`);
    assert.deepEqual(compiled.digests, [], what);
    return;
  }
  assert.deepEqual(mine.other, compileVerdict(again).other, `compile(doc) and compile(stored) agree on errors ${what}`);
  assert.deepEqual(compiled.digests, again.digests, `compile(doc) and compile(stored) give the same digests ${what}`);
  assert.deepEqual(compiled.configMaps, again.configMaps, `compile(doc) and compile(stored) give the same ConfigMaps ${what}`);
}

let seq = 0;
function named(doc: Omit<Doc, 'metadata'> & { metadata?: Record<string, unknown> }): Doc {
  return { ...doc, metadata: { ...(doc.metadata ?? {}), name: `doc-${++seq}` } } as Doc;
}
const ip = (spec: unknown, extra: Record<string, unknown> = {}): Doc => named({ apiVersion: V, kind: 'InferencePolicy', spec, ...extra });
const tp = (spec: unknown): Doc => named({ apiVersion: V, kind: 'ToolPolicy', spec });
const ea = (spec: unknown): Doc => named({ apiVersion: V, kind: 'EgressApproval', spec });
const sb = (spec: unknown): Doc => named({ apiVersion: V, kind: 'KarsSandbox', spec });

/** Golden and hostile documents: each is checked on its own. */
function goldenDocs(): Doc[] {
  const approval = { sandbox: 'demo', hosts: [{ host: 'pypi.org' }], reason: 'install deps', ttl: 'PT1H' };
  return [
    // valid, with defaults to apply (appliesTo.action, fallback, sandboxMatchLabels)
    ip({ appliesTo: { sandboxName: 'demo' }, tokenBudget: { dailyTokens: 1000 } }),
    ip({ appliesTo: { sandboxMatchLabels: { team: 'a' } }, modelPreference: { primary: { provider: 'azure-openai', deployment: 'gpt' } } }),
    ip({ appliesTo: { action: null } }), // a non-nullable null is replaced by the default
    tp({ appliesTo: { tool: '*' }, agtProfile: { inline: 'rules: []\n' }, commerce: { dailyCap: 'USD 1' } }),
    ea(approval),
    sb({ inferenceRef: { name: 'chat' }, networkPolicy: { allowedEndpoints: [{ host: 'example.com', port: 443 }] } }),
    // unknown fields at every depth: root, spec, nested object, list item, map value, status
    ip(
      { appliesTo: { sandboxName: 'demo', bogus: 1 }, tokenBudget: { dailyTokens: 5, extra: { deep: [1, 2] } }, junk: 'x' },
      { extraRoot: true },
    ),
    ip({
      appliesTo: {},
      modelPreference: {
        primary: { provider: 'p', deployment: 'd', weight: 3 },
        fallback: [
          { provider: 'a', deployment: 'b' },
          { provider: 'c', deployment: 'd', x: 1 },
        ],
      },
    }),
    sb({ inferenceREF: { name: 'typo' }, networkPolicy: { allowedEndpoints: [{ host: 'h.example', scheme: 'https' }] } }),
    ip({ appliesTo: {} }, { status: { phase: 'Ready', notAField: 1 } }),
    // hostile keys: Unicode, dots, spaces, a quote-free but odd key, and __proto__ as a plain key
    ip({ appliesTo: {}, ключ: 1, 'a.b': 2, ' space ': 3, 'emoji😀': { x: 1 } }),
    ip(JSON.parse('{"appliesTo":{},"__proto__":{"polluted":true}}')),
    // wrong types and enums (schema causes), several at once
    ip({ appliesTo: { sandboxName: 7 }, tokenBudget: { dailyTokens: 'lots' }, contentSafety: { hate: 'Extreme' } }),
    ip({ appliesTo: 'everything' }),
    ip({ tokenBudget: {} }), // required appliesTo missing
    ip([1, 2, 3]),
    ea({ ...approval, hosts: [] }),
    ea({ ...approval, hosts: [{ host: 'a b' }], reason: '' }),
    // CEL rule failures
    ip({ appliesTo: {}, tokenBudget: { dailyTokens: 10, monthlyTokens: 5 } }),
    ip({ appliesTo: {}, bundleRef: { registry: 'r.io', repository: 'x', digest: `sha256:${'a'.repeat(64)}` }, displayName: 'no' }),
    tp({ appliesTo: {}, agtProfile: {} }),
    tp({ appliesTo: {}, commerce: { dailyCap: 'USD 10', monthlyCap: 'EUR 20' } }),
    ea({ ...approval, ttl: 'P8D' }),
    ea({ ...approval, ttl: 'PT0S' }),
    ea({ ...approval, ttl: 'P' }),
    // CEL is skipped after a blocking error, on both sides
    ea({ ...approval, ttl: 5 }),
    // unknown fields and schema causes together
    ip({ appliesTo: { sandboxName: 1, nope: true }, tokenBudget: { dailyTokens: -1, monthlyTokens: 'x', more: 1 } }),
    // deep unknown nesting
    ip({ appliesTo: {}, deep: nest(200) }),
  ];
}

function nest(n: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < n; i++) v = { k: v };
  return v;
}

describe('kars compile and kars apiserver admit the same (admission once)', () => {
  let ts: TestServer;
  let dir = '';
  before(async () => {
    ts = await startTestServer();
    await createCrds(ts.client, inferencePolicyCrd(), toolPolicyCrd(), egressApprovalCrd(), karsSandboxCrd());
    dir = mkdtempSync(join(tmpdir(), 'kars-agree-'));
  });
  after(async () => {
    await ts.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('agrees on every golden and hostile document: unknown fields, causes, defaults, digests', async () => {
    for (const doc of goldenDocs()) await agree(ts, doc);
  });

  it('agrees on random mutations of valid policies (fast-check)', async () => {
    const bases = (): Doc[] => [
      ip({ appliesTo: { sandboxName: 'demo' }, tokenBudget: { dailyTokens: 10, monthlyTokens: 100 }, contentSafety: { hate: 'Low' } }),
      ea({ sandbox: 'demo', hosts: [{ host: 'pypi.org', port: 443 }], reason: 'r', ttl: 'PT2H' }),
      tp({ appliesTo: { tool: 'x' }, agtProfile: { inline: 'a: 1\n' }, rateLimit: { rps: 1, window: '1m' } }),
    ];
    const key = fc.oneof(
      fc.constantFrom('bogus', 'action', 'dailyTokens', 'ttl', 'host', 'port', 'hate', '__proto__', 'ключ'),
      fc.string({ maxLength: 6 }),
    );
    const value = fc.oneof(
      fc.constant(null),
      fc.boolean(),
      fc.integer({ min: -5, max: 2 ** 40 }),
      fc.string({ maxLength: 8 }),
      fc.constant({}),
      fc.constant([]),
      fc.constant({ x: [1, { y: 2 }] }),
    );
    const mutation = fc.record({ op: fc.constantFrom('set', 'delete'), pick: fc.nat(), key, value });
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 2 }), fc.array(mutation, { minLength: 1, maxLength: 4 }), async (which, muts) => {
        const doc = bases()[which] as Doc;
        for (const m of muts) mutate(doc, m);
        await agree(ts, doc);
      }),
      { numRuns: 60 },
    );
  });

  it('`kars compile` as a process names every field the apiserver refuses', async () => {
    const docs = goldenDocs();
    const file = join(dir, 'golden.yaml');
    writeFileSync(file, docs.map((d) => stringify(d)).join('---\n'));
    const run = spawnSync(process.execPath, [join(repoRoot, 'apps/cli/bin/kars.js'), 'compile', '-f', file, '--now', NOW], {
      encoding: 'utf8',
    });
    assert.equal(run.status, 1, run.stderr);
    assert.equal(run.stdout, '');
    for (const [i, doc] of docs.entries()) {
      const server = await serverAdmit(ts, { ...doc, metadata: { ...doc.metadata, name: `${doc.metadata.name}-cli` } });
      const lines = run.stderr.split('\n').filter((l) => l.startsWith(`error: ${file} doc ${i + 1}:`));
      const unknown = compileVerdict(compileDocuments([doc], { now: NOW, namespace: NS })).unknown;
      assert.equal(server.strictMessage !== undefined, unknown.length > 0, `doc ${i + 1}: refused for unknown fields on both sides`);
      for (const f of unknown)
        assert.ok(
          lines.some((l) => l.includes(` ${f}: ${UNKNOWN}`)),
          `doc ${i + 1}: unknown field ${f} reported:\n${lines.join('\n')}`,
        );
      for (const [f, msg] of server.causes)
        assert.ok(
          lines.some((l) => l.includes(`${f === '' ? '' : ` ${f}:`} ${msg} (`)),
          `doc ${i + 1}: cause ${f} ${msg} reported:\n${lines.join('\n')}`,
        );
      if (server.status === 201 && unknown.length === 0)
        assert.ok(
          lines.every((l) => !l.includes(UNKNOWN)),
          `doc ${i + 1}: no unknown field reported:\n${lines.join('\n')}`,
        );
    }
  });
});

/** Set or delete a key in the `pick`-th object of the document's spec (in document order). */
function mutate(doc: Doc, m: { op: string; pick: number; key: string; value: unknown }): void {
  const objects: Array<Record<string, unknown>> = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      objects.push(v as Record<string, unknown>);
      Object.values(v).forEach(walk);
    }
  };
  walk(doc['spec']);
  const target = objects[m.pick % objects.length];
  if (target === undefined) return;
  const keys = Object.keys(target);
  if (m.op === 'delete' && keys.length > 0) delete target[keys[m.pick % keys.length] as string];
  else Object.defineProperty(target, m.key, { value: structuredClone(m.value), enumerable: true, writable: true, configurable: true });
}
