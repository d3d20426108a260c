/**
 * Compile a set of parsed YAML documents the way the controller would see them, offline.
 *
 * Each kars document goes through what kube-apiserver does on create (prune, default, schema and
 * CEL validation, using the CRDs from `@kars/policy-api`), then through the controller's semantic
 * validation (`validateObject`), then through the compiler for its kind. Defaulting matters: the
 * controller compiles objects as the server stored them (for example `appliesTo.action: "*"`), so
 * only a defaulted object compiles to the digest the routers will echo.
 *
 * EgressApprovals are compiled per sandbox: every non-expired approval naming the same sandbox in
 * the same namespace shares one approvals ConfigMap (the EgressApproval descriptor's) and one merged digest
 * over `baseline ∪ all their hosts`, where the baseline is the KarsSandbox's
 * `spec.networkPolicy.allowedEndpoints` (when that sandbox is among the documents).
 *
 * Guarantees: pure and deterministic for a given `now`; never throws. Every problem is reported in
 * `errors` naming the document, kind, name and field; every document is checked (not just the first bad one).
 *
 * Assumptions:
 * - A document without `metadata.namespace` lives in `opts.namespace` (default `default`), as
 *   `kubectl apply` without `-n` would put it.
 * - Unknown fields are errors, as with kubectl's default strict field validation; the API server
 *   would otherwise drop them silently and the compiled bytes would not say what the author meant.
 * - Documents of other kinds (Namespace, ConfigMap, ...) are skipped with a warning.
 *
 * Caveats:
 * - An approval's `effectiveAt` is its `status.effectiveAt` when the document carries one (for
 *   example `kubectl get -o yaml` output), otherwise `now`, truncated to whole seconds.
 * - An approval whose sandbox is not among the documents, or whose sandbox uses a signed
 *   `allowlistRef`, gets a merged digest over what is known, with a warning saying so.
 * - Sandbox phase (`Running`) is not checked: offline there is no live status to trust.
 */
import { API_VERSION, parseTtl, validateObject, type EgressApproval, type KarsObject, type KarsSandbox } from '@kars/policy-api';
import type { Admission } from '@kars/kube-schema';
import { admitKarsObject, isKarsKind, suggestKnownField } from './admission.js';
import type { CompiledConfigMap } from './configmaps.js';
import { rfc3339Seconds } from './egress.js';
import { expectedEgressDigest } from './router-view.js';
import { isObject } from '@kars/kube-core';
import { approvalFile, egressApprovalsConfigMap, EGRESS_APPROVAL_KIND } from './kinds/egress-approval.js';
import { INFERENCE_POLICY_KIND } from './kinds/inference-policy.js';
import { TOOL_POLICY_KIND } from './kinds/tool-policy.js';
import type { EchoExpectation, ProfileKind } from './kinds/descriptor.js';

/** Options of {@link compileDocuments}. */
export interface CompileDocumentsOptions {
  /** The current time, RFC 3339. Used for approvals without `status.effectiveAt` and for expiry. */
  now: string;
  /** The controller's environment (`EGRESS_APPROVAL_MAX_TTL_SECONDS`). Never read from `process.env` here. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Namespace of documents without `metadata.namespace`. Default `default`. */
  namespace?: string;
}

/** A problem with one document. `index` is the document's position in the input (-1 for the options). */
export interface CompileError {
  index: number;
  kind: string;
  namespace: string;
  name: string;
  /** kube-style path of the offending field (`spec.hosts[0].port`), or "" for the whole document. */
  field: string;
  message: string;
  /** The condition reason the controller would report (`InvalidSpec`, `TtlInvalid`, `InvalidRef`, ...). */
  reason: string;
}

/** Something the output depends on that the caller should know about; not an error. */
export interface CompileWarning {
  index: number;
  kind: string;
  namespace: string;
  name: string;
  message: string;
}

interface DigestBase {
  namespace: string;
  name: string;
  /** The ConfigMap holding the compiled artifact, in `namespace`; null when nothing is written. */
  configMap: string | null;
}

/**
 * What a sandbox's routers must echo for a compiled policy before it is Ready (its descriptor's
 * expectation, the same list the controller waits for), and what its status will record.
 */
export interface PolicyDigest extends DigestBase {
  kind: 'InferencePolicy' | 'ToolPolicy';
  /** Every echo a referring router must report: kind and digest. */
  echoes: EchoExpectation[];
  /** `status.compiledDigest` (a ToolPolicy: its AGT profile's digest, `status.agtProfileDigest`); null: none. */
  compiledDigest: string | null;
  versionHash: string;
}

/** An InferencePolicy's digests: echoed under `InferencePolicy`. */
export type InferencePolicyDigest = PolicyDigest & { kind: 'InferencePolicy' };
/** A ToolPolicy's digests: echoed under `ToolPolicy` (profile.json) and, with an AGT profile, `AgtProfile`. */
export type ToolPolicyDigest = PolicyDigest & { kind: 'ToolPolicy' };

/** The merged digest the approval's sandbox router echoes; null (and no echo) once the approval has expired. */
export interface EgressApprovalDigest extends DigestBase {
  kind: 'EgressApproval';
  echoes: EchoExpectation[];
  sandbox: string;
  mergedDigest: string | null;
  effectiveAt: string;
  expiresAt: string;
  expired: boolean;
}

export type DigestEntry = InferencePolicyDigest | ToolPolicyDigest | EgressApprovalDigest;

export interface CompileDocumentsResult {
  /** Every ConfigMap to apply, sorted by (namespace, name). */
  configMaps: CompiledConfigMap[];
  /** One entry per policy document, in input order. */
  digests: DigestEntry[];
  errors: CompileError[];
  warnings: CompileWarning[];
}

interface Admitted {
  index: number;
  obj: KarsObject;
  namespace: string;
  name: string;
}

/** Compile parsed YAML documents into the ConfigMaps and digests the controller would produce. */
export function compileDocuments(docs: readonly unknown[], opts: CompileDocumentsOptions): CompileDocumentsResult {
  const errors: CompileError[] = [];
  const warnings: CompileWarning[] = [];
  const configMaps: CompiledConfigMap[] = [];
  const defaultNs = opts.namespace ?? 'default';
  const nowMs = Date.parse(opts.now);
  if (Number.isNaN(nowMs)) {
    errors.push({
      index: -1,
      kind: '',
      namespace: '',
      name: '',
      field: 'now',
      message: `must be an RFC 3339 time, got ${JSON.stringify(opts.now)}`,
      reason: 'InvalidSpec',
    });
    return { configMaps, digests: [], errors, warnings };
  }

  const admitted: Admitted[] = [];
  const seen = new Set<string>();
  docs.forEach((doc, index) => {
    const a = admitDocument(doc, index, defaultNs, opts, errors, warnings);
    if (a === undefined) return;
    const key = `${a.obj.kind}/${a.namespace}/${a.name}`;
    if (seen.has(key)) {
      errors.push({
        index,
        kind: a.obj.kind,
        namespace: a.namespace,
        name: a.name,
        field: 'metadata.name',
        message: `duplicate ${a.obj.kind} ${a.namespace}/${a.name}: it appears earlier in the input`,
        reason: 'InvalidSpec',
      });
      return;
    }
    seen.add(key);
    admitted.push(a);
  });

  const digestsByIndex = new Map<number, DigestEntry>();
  const sandboxes = new Map<string, KarsSandbox>();
  const approvals: Array<Admitted & { obj: EgressApproval }> = [];
  for (const a of admitted) {
    const { obj, index, namespace, name } = a;
    const err = (field: string, message: string, reason: string): void => {
      errors.push({ index, kind: obj.kind, namespace, name, field, message, reason });
    };
    switch (obj.kind) {
      case 'InferencePolicy':
        compileProfile(INFERENCE_POLICY_KIND, obj, a, err, configMaps, digestsByIndex);
        break;
      case 'ToolPolicy':
        compileProfile(TOOL_POLICY_KIND, obj, a, err, configMaps, digestsByIndex);
        break;
      case 'KarsSandbox':
        sandboxes.set(`${namespace}/${name}`, obj);
        break;
      case 'EgressApproval':
        approvals.push({ ...a, obj });
        break;
    }
  }

  compileApprovals(approvals, sandboxes, nowMs, configMaps, digestsByIndex, warnings);

  configMaps.sort((x, y) => cmp(x.metadata.namespace, y.metadata.namespace) || cmp(x.metadata.name, y.metadata.name));
  const digests = [...digestsByIndex.entries()].sort(([i], [j]) => i - j).map(([, d]) => d);
  return { configMaps, digests, errors, warnings };
}

/** Compile one policy with its kind's descriptor, recording its ConfigMap and digests, or its error. */
function compileProfile<P extends { metadata: { name?: string; namespace?: string } }, C extends { versionHash: string }, L>(
  kind: ProfileKind<P, C, L>,
  obj: P,
  at: Admitted,
  err: (field: string, message: string, reason: string) => void,
  configMaps: CompiledConfigMap[],
  digests: Map<number, DigestEntry>,
): void {
  const r = kind.compile(obj);
  if (!r.ok) {
    err(r.field, r.message, r.reason);
    return;
  }
  const s = kind.status(r);
  configMaps.push(s.configMap);
  digests.set(at.index, {
    kind: kind.kind,
    namespace: at.namespace,
    name: at.name,
    configMap: s.configMap.metadata.name,
    echoes: s.expect,
    compiledDigest: s.digest ?? null,
    versionHash: r.versionHash,
  });
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Shape checks, server-side admission (prune, default, validate) and semantic validation of one document. */
function admitDocument(
  doc: unknown,
  index: number,
  defaultNs: string,
  opts: CompileDocumentsOptions,
  errors: CompileError[],
  warnings: CompileWarning[],
): Admitted | undefined {
  if (doc === null || doc === undefined) return undefined; // an empty document, e.g. a trailing `---`
  if (!isObject(doc)) {
    errors.push({
      index,
      kind: '',
      namespace: '',
      name: '',
      field: '',
      message: 'document must be a YAML mapping with apiVersion, kind, metadata and spec',
      reason: 'InvalidSpec',
    });
    return undefined;
  }
  const d = doc as Record<string, unknown>;
  const kind = typeof d['kind'] === 'string' ? d['kind'] : '';
  const apiVersion = typeof d['apiVersion'] === 'string' ? d['apiVersion'] : '';
  const meta = isObject(d['metadata']) ? (d['metadata'] as Record<string, unknown>) : {};
  const name = typeof meta['name'] === 'string' ? meta['name'] : '';
  const namespace = typeof meta['namespace'] === 'string' && meta['namespace'] !== '' ? meta['namespace'] : defaultNs;
  const at = { index, kind, namespace, name };

  if (!isKarsKind(kind)) {
    if (apiVersion.startsWith('kars.azure.com/')) {
      errors.push({
        ...at,
        field: 'kind',
        message: `unknown kind ${JSON.stringify(kind)} in kars.azure.com: expected InferencePolicy, ToolPolicy, EgressApproval or KarsSandbox`,
        reason: 'InvalidSpec',
      });
    } else {
      warnings.push({ ...at, message: `skipped: ${apiVersion || '(no apiVersion)'} ${kind || '(no kind)'} is not a kars policy kind` });
    }
    return undefined;
  }
  if (apiVersion !== API_VERSION) {
    const hint = apiVersion.startsWith('azureclaw.azure.com/') ? ' (azureclaw.azure.com is the pre-rename group)' : '';
    errors.push({
      ...at,
      field: 'apiVersion',
      message: `must be ${API_VERSION}, got ${JSON.stringify(apiVersion)}${hint}`,
      reason: 'InvalidSpec',
    });
    return undefined;
  }
  if (name === '') {
    errors.push({ ...at, field: 'metadata.name', message: 'is required', reason: 'InvalidSpec' });
    return undefined;
  }

  let obj: Record<string, unknown>;
  try {
    obj = structuredClone(d);
  } catch (e) {
    errors.push({
      ...at,
      field: '',
      message: `document is not plain data: ${e instanceof Error ? e.message : String(e)}`,
      reason: 'InvalidSpec',
    });
    return undefined;
  }
  obj['metadata'] = { ...meta, namespace };
  // The apiserver's own admission (kube-schema's admit(): prune, default, schema + CEL), so the
  // object compiled here is the object the server would store; plus ObjectMeta's unknown fields.
  let admission: Admission;
  try {
    admission = admitKarsObject(kind, obj);
  } catch (e) {
    // Only a broken CRD definition in @kars/policy-api gets here; report it rather than throw.
    errors.push({
      ...at,
      field: '',
      message: `internal error: the ${kind} CRD schema does not compile: ${e instanceof Error ? e.message : String(e)}`,
      reason: 'InvalidSpec',
    });
    return undefined;
  }
  let bad = false;
  for (const p of admission.unknownFields) {
    const near = suggestKnownField(kind, p);
    errors.push({
      ...at,
      field: p,
      message: `unknown field${near === undefined ? '' : `; did you mean ${near}?`} (kubectl would reject it under strict field validation; the API server would drop it)`,
      reason: 'InvalidSpec',
    });
    bad = true;
  }
  for (const c of admission.causes) {
    errors.push({ ...at, field: c.field, message: c.message, reason: 'InvalidSpec' });
    bad = true;
  }
  if (bad) return undefined;

  const karsObj = obj as unknown as KarsObject;
  const causes = validateObject(karsObj, { env: opts.env ?? {} });
  for (const c of causes) errors.push({ ...at, field: c.field, message: c.message, reason: c.reason });
  if (causes.length > 0) return undefined;
  return { index, obj: karsObj, namespace, name };
}

/** Group approvals by sandbox, drop expired ones, and compile each sandbox's ConfigMap and merged digest. */
function compileApprovals(
  approvals: ReadonlyArray<Admitted & { obj: EgressApproval }>,
  sandboxes: ReadonlyMap<string, KarsSandbox>,
  nowMs: number,
  configMaps: CompiledConfigMap[],
  digests: Map<number, DigestEntry>,
  warnings: CompileWarning[],
): void {
  interface Timed {
    a: Admitted & { obj: EgressApproval };
    effectiveAt: string;
    expiresAt: string;
    expired: boolean;
  }
  const groups = new Map<string, Timed[]>();
  for (const a of approvals) {
    // The TTL was validated (grammar, > 0, ≤ ceiling) during admission.
    const ttlSeconds = parseTtl(a.obj.spec.ttl) ?? 0;
    const stamped = a.obj.status?.effectiveAt;
    const stampedMs = stamped === undefined ? Number.NaN : Date.parse(stamped);
    const effMs = Math.floor((Number.isNaN(stampedMs) ? nowMs : stampedMs) / 1000) * 1000;
    const expMs = effMs + ttlSeconds * 1000;
    const key = `${a.namespace}/${a.obj.spec.sandbox}`;
    const list = groups.get(key) ?? [];
    list.push({ a, effectiveAt: rfc3339Seconds(effMs), expiresAt: rfc3339Seconds(expMs), expired: nowMs >= expMs });
    groups.set(key, list);
  }

  for (const [key, list] of groups) {
    const first = list[0];
    if (first === undefined) continue;
    const { namespace } = first.a;
    const sandbox = first.a.obj.spec.sandbox;
    const sb = sandboxes.get(key);
    const at = { index: first.a.index, kind: 'EgressApproval', namespace, name: first.a.name };
    if (sb === undefined) {
      warnings.push({
        ...at,
        message: `KarsSandbox ${key} is not among the inputs: the merged digest assumes an empty baseline allowlist; pass the sandbox too for the digest its router will echo`,
      });
    } else if (sb.spec.networkPolicy?.allowlistRef !== undefined) {
      warnings.push({
        ...at,
        message: `KarsSandbox ${key} uses a signed allowlistRef, which is not resolved offline: the merged digest covers spec.networkPolicy.allowedEndpoints only`,
      });
    }
    const active = list.filter((t) => !t.expired);
    const merged = {
      digest: expectedEgressDigest(
        sb,
        list.map((t) => ({ hosts: t.a.obj.spec.hosts, expiresAtMs: Date.parse(t.expiresAt) })),
        nowMs,
      ),
    };
    let cmName: string | null = null;
    if (active.length > 0) {
      const cm = egressApprovalsConfigMap({
        sandbox,
        namespace,
        files: active.map((t) => approvalFile({ metadata: { name: t.a.name }, spec: t.a.obj.spec }, t.effectiveAt, t.expiresAt)),
      });
      configMaps.push(cm);
      cmName = cm.metadata.name;
    }
    for (const t of list) {
      digests.set(t.a.index, {
        kind: 'EgressApproval',
        namespace,
        name: t.a.name,
        configMap: t.expired ? null : cmName,
        echoes: t.expired ? [] : [{ kind: EGRESS_APPROVAL_KIND.echoKinds[0], digest: merged.digest }],
        sandbox,
        mergedDigest: t.expired ? null : merged.digest,
        effectiveAt: t.effectiveAt,
        expiresAt: t.expiresAt,
        expired: t.expired,
      });
    }
  }
}
