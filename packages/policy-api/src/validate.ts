/**
 * Semantic validation of kars objects beyond the CRD schema: what the controller checks before it compiles
 * (setting `Degraded` with the cause's {@link ValidationCause.reason}) and what the CLI checks before it applies.
 *
 * Every rule the CRD schema also enforces is repeated here, so an object that reached the controller without
 * admission (an older CRD, a test fixture, a CLI file) gets the same answer. The functions never throw and never
 * read the environment themselves: pass `env` explicitly.
 *
 * Assumptions: inputs have the TS shape (the schema's job); values are still checked defensively, so a wrongly
 * typed field yields a cause rather than an exception.
 */
import { parseAllDocuments } from 'yaml';
import {
  Reason,
  type EgressApprovalSpec,
  type EgressEndpoint,
  type InferencePolicySpec,
  type KarsObject,
  type KarsSandboxSpec,
  type ToolPolicySpec,
} from './types.js';
import { INFERENCE_CONTENT_FIELDS } from './types.js';
import { isIPv6 } from 'node:net';
import { approvalHostProblem, canonicalHost } from './egress-host.js';
import { MAX_TOOL_PINS, MCP_SERVER_NAME_PATTERN, TOOL_NAME_PATTERN } from './crds.js';
import { isToolDigest } from './tool-pin.js';
import { dryRunUnrecordedField, ENFORCEMENT_MODES } from './dry-run.js';

/** One problem, naming the field as kube-apiserver would (`spec.hosts[3].port`). */
export interface ValidationCause {
  field: string;
  message: string;
  /** The condition reason a reconciler reports for this cause (`InvalidSpec`, `TtlInvalid`, ...). */
  reason: Reason;
}

export interface ValidateOptions {
  /** Environment to read `EGRESS_APPROVAL_MAX_TTL_SECONDS` from (the controller's env). Default: none set. */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * Also apply the rules only the CLI enforces (a ToolPolicy selector must name at least one of tool, mcpServer or
   * sandboxMatchLabels). The controller leaves this off, so objects the API server accepted are not degraded.
   */
  clientSide?: boolean;
  /**
   * The sandbox's baseline endpoints, when known: an approval may open a special host (loopback,
   * private, link-local, metadata) only if the baseline lists it (see `egress-host.ts`). Without it,
   * only too-wide wildcards are refused (the controller passes it and refuses the rest).
   */
  baseline?: readonly EgressEndpoint[];
}

/** Thrown by {@link assertValid}. */
export class PolicyValidationError extends Error {
  readonly code = 'KARS_POLICY_INVALID';
  readonly causes: ValidationCause[];
  constructor(what: string, causes: ValidationCause[]) {
    const head = causes.map((c) => `${c.field}: ${c.message}`).join('; ');
    super(`${what} is invalid: ${head}`);
    this.name = 'PolicyValidationError';
    this.causes = causes;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// TTL

/** Default TTL ceiling (Helm `maxApprovalTtl`): 24 h. */
export const DEFAULT_TTL_CEILING_SECONDS = 24 * 3600;
/** Hard TTL ceiling, whatever the env says: 7 d. */
export const MAX_TTL_CEILING_SECONDS = 7 * 24 * 3600;
export const TTL_CEILING_ENV = 'EGRESS_APPROVAL_MAX_TTL_SECONDS';

const TTL_RE = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;

/**
 * Parse an EgressApproval TTL, `P[nD][T[nH][nM][nS]]`, into seconds.
 *
 * Returns undefined when the text is not in the grammar: weeks, months and years, fractions, signs, lower case,
 * whitespace, a bare `P`, or a `T` with no time unit after it. `P0D` parses to 0 (the grammar allows it; the
 * "> 0" rule is validation's). A duration too large to represent exactly returns `Infinity`, which is above any
 * ceiling.
 */
export function parseTtl(s: string): number | undefined {
  const m = TTL_RE.exec(s);
  if (m === null) return undefined;
  const [, d, h, min, sec] = m;
  if (d === undefined && h === undefined && min === undefined && sec === undefined) return undefined;
  if (s.endsWith('T')) return undefined;
  const big = (x: string | undefined, mult: bigint): bigint => (x === undefined ? 0n : BigInt(x) * mult);
  const total = big(d, 86400n) + big(h, 3600n) + big(min, 60n) + big(sec, 1n);
  return total > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(total);
}

/**
 * The TTL ceiling in seconds: `min(EGRESS_APPROVAL_MAX_TTL_SECONDS, 7d)`. An unset, empty, zero or unparseable
 * value (anything but decimal digits, after trimming) means the 24 h default.
 */
export function ttlCeilingSeconds(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[TTL_CEILING_ENV]?.trim() ?? '';
  if (!/^\d+$/.test(raw)) return DEFAULT_TTL_CEILING_SECONDS;
  const n = Number(raw);
  if (n === 0) return DEFAULT_TTL_CEILING_SECONDS;
  return Math.min(n, MAX_TTL_CEILING_SECONDS);
}

/** Format seconds the way the TTL grammar spells them (`P1DT2H`), for messages. */
export function formatTtl(seconds: number): string {
  if (seconds <= 0) return 'PT0S';
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const time = `${h > 0 ? `${h}H` : ''}${m > 0 ? `${m}M` : ''}${s > 0 ? `${s}S` : ''}`;
  return `P${d > 0 ? `${d}D` : ''}${time === '' ? '' : `T${time}`}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Field helpers

const MAX_HOSTS = 16;
const MAX_REASON_BYTES = 512;
const MAX_TICKET_CHARS = 128;

function isNonNegInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Why `host` is not a bare host name, or undefined when it is one. Rejects URLs (a scheme or a path), a port
 * (it belongs in `port`), user info, query, fragment and whitespace — the same set the CRD's host pattern rejects.
 */
export function hostProblem(host: unknown): string | undefined {
  if (typeof host !== 'string' || host === '') return 'must be a non-empty host name';
  if (host.length > 253) return 'must be at most 253 characters';
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(host);
  if (scheme !== null) return `must be a host name, not a URL: remove "${scheme[0]}"`;
  if (host.includes('/')) return 'must be a host name, not a URL: remove the path';
  if (host.includes(':')) {
    // An IPv6 literal is written bare (`2001:db8::1`); the port is its own field (ADR 0045).
    if (host.startsWith('[')) return 'must be an IPv6 address without brackets (e.g. 2001:db8::1): set port instead';
    if (host.includes('%')) return 'must not carry an IPv6 zone id ("%..."): a zone names an interface of one machine';
    if (!isIPv6(host)) return 'must not carry a port: set port instead (an IPv6 address must be a valid one, e.g. 2001:db8::1)';
    return undefined;
  }
  if (/[\s@?#]/.test(host)) return 'must be a bare host name (no whitespace, "@", "?" or "#")';
  return undefined;
}

function checkEndpoints(list: readonly EgressEndpoint[], path: string, out: ValidationCause[], reason: Reason): void {
  list.forEach((e, i) => {
    const p = hostProblem(e.host);
    if (p !== undefined) out.push({ field: `${path}[${i}].host`, message: p, reason });
    if (e.port !== undefined && !(Number.isInteger(e.port) && e.port >= 1 && e.port <= 65535)) {
      out.push({ field: `${path}[${i}].port`, message: `must be an integer from 1 to 65535, got ${String(e.port)}`, reason });
    }
  });
}

/**
 * Parse a CLI `--host host[:port]` argument. URLs are rejected rather than guessed at (`https://x/y` is an error,
 * not `x`), so what the user typed is what the approval widens.
 */
export function parseHostArg(arg: string): { ok: true; endpoint: EgressEndpoint } | { ok: false; message: string } {
  // An IPv6 address in brackets, as in a URL authority: `[2001:db8::1]` or `[2001:db8::1]:443`.
  const v6 = /^\[([^\]]*)\](?::(.*))?$/.exec(arg);
  if (v6 !== null) {
    const host = v6[1] ?? '';
    const p = v6[2];
    if (p !== undefined && (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535))
      return { ok: false, message: `--host "${arg}": port must be an integer from 1 to 65535` };
    const problem = isIPv6(host) ? hostProblem(host) : 'must be an IPv6 address inside the brackets';
    if (problem !== undefined) return { ok: false, message: `--host "${arg}": host ${problem}` };
    return { ok: true, endpoint: p === undefined ? { host } : { host, port: Number(p) } };
  }
  if (!arg.includes('/') && arg.indexOf(':') !== arg.lastIndexOf(':'))
    return { ok: false, message: `--host "${arg}": write an IPv6 address in brackets, as in [2001:db8::1]:443` };
  const colon = arg.lastIndexOf(':');
  let host = arg;
  let port: number | undefined;
  if (colon >= 0 && !arg.includes('/')) {
    const p = arg.slice(colon + 1);
    if (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535)
      return { ok: false, message: `--host "${arg}": port must be an integer from 1 to 65535` };
    host = arg.slice(0, colon);
    port = Number(p);
  }
  const problem = hostProblem(host);
  if (problem !== undefined) return { ok: false, message: `--host "${arg}": host ${problem}` };
  return { ok: true, endpoint: port === undefined ? { host } : { host, port } };
}

/** Why `reason` is not acceptable, or undefined. 1..512 UTF-8 bytes; no control bytes but TAB, LF, CR; no DEL. */
export function reasonProblem(reason: unknown): string | undefined {
  if (typeof reason !== 'string' || reason === '') return 'must be 1 to 512 bytes of text';
  const bytes = Buffer.byteLength(reason, 'utf8');
  if (bytes > MAX_REASON_BYTES) return `must be at most ${MAX_REASON_BYTES} bytes (UTF-8), got ${bytes}`;
  for (let i = 0; i < reason.length; i++) {
    const c = reason.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || c === 0x7f) {
      return `must not contain control characters other than TAB, LF and CR (found 0x${c.toString(16).padStart(2, '0')} at index ${i})`;
    }
  }
  return undefined;
}

/** A money amount `"USD 100.00"` as currency and thousandths, or undefined when malformed. */
export function parseMoney(s: unknown): { currency: string; milli: bigint } | undefined {
  if (typeof s !== 'string') return undefined;
  const m = /^([A-Z]{3}) (0|[1-9][0-9]{0,11})(?:\.([0-9]{1,3}))?$/.exec(s);
  if (m === null) return undefined;
  const [, currency, units, frac] = m;
  if (currency === undefined || units === undefined) return undefined;
  return { currency, milli: BigInt(units) * 1000n + BigInt((frac ?? '').padEnd(3, '0')) };
}

// ---------------------------------------------------------------------------------------------------------------
// Per kind

/** Why `spec.enforcement` is invalid (ADR 0050), or undefined: absent, `Enforce` or `DryRun`, spelled exactly. */
function enforcementProblem(v: unknown): string | undefined {
  if (v === undefined || (ENFORCEMENT_MODES as readonly unknown[]).includes(v)) return undefined;
  const near =
    typeof v === 'string' ? ENFORCEMENT_MODES.find((m) => m.toLowerCase() === v.replace(/[-_\s]/g, '').toLowerCase()) : undefined;
  return `must be Enforce or DryRun, got ${JSON.stringify(v)}${near !== undefined ? ` (did you mean ${near}?)` : ''}`;
}

/** InferencePolicy: bundleRef exclusivity, monthly ≥ daily tokens, non-negative integer budgets, severities. */
export function validateInferencePolicySpec(spec: InferencePolicySpec): ValidationCause[] {
  const out: ValidationCause[] = [];
  const invalid = (field: string, message: string): void => {
    out.push({ field, message, reason: Reason.InvalidSpec });
  };
  if (typeof spec.appliesTo !== 'object' || spec.appliesTo === null) invalid('spec.appliesTo', 'is required');
  const mode = enforcementProblem(spec.enforcement);
  if (mode !== undefined) invalid('spec.enforcement', mode);
  const unrecorded = dryRunUnrecordedField(spec);
  if (unrecorded !== undefined) invalid(unrecorded.field, unrecorded.message);
  if (spec.bundleRef !== undefined) {
    const set = INFERENCE_CONTENT_FIELDS.filter((f) => spec[f] !== undefined);
    if (set.length > 0) invalid('spec.bundleRef', `is mutually exclusive with ${set.join(', ')}: remove those fields or the bundleRef`);
  }
  const tb = spec.tokenBudget;
  if (tb !== undefined) {
    for (const f of ['perRequestTokens', 'dailyTokens', 'monthlyTokens'] as const) {
      const v = tb[f];
      if (v !== undefined && !isNonNegInt(v)) invalid(`spec.tokenBudget.${f}`, `must be a non-negative integer, got ${String(v)}`);
    }
    if (isNonNegInt(tb.dailyTokens) && isNonNegInt(tb.monthlyTokens) && tb.monthlyTokens < tb.dailyTokens) {
      invalid('spec.tokenBudget.monthlyTokens', `must be greater than or equal to dailyTokens (${tb.monthlyTokens} < ${tb.dailyTokens})`);
    }
  }
  const cs = spec.contentSafety;
  if (cs !== undefined) {
    for (const f of ['hate', 'selfHarm', 'sexual', 'violence'] as const) {
      const v: unknown = cs[f];
      if (v !== undefined && v !== 'Safe' && v !== 'Low' && v !== 'Medium' && v !== 'High') {
        invalid(`spec.contentSafety.${f}`, `must be one of Safe, Low, Medium, High, got ${JSON.stringify(v)}`);
      }
    }
  }
  return out;
}

/** Why an inline AGT profile is not YAML, or undefined when every document in it parses. */
export function agtInlineProblem(text: string): string | undefined {
  try {
    for (const doc of parseAllDocuments(text)) {
      const err = doc.errors[0];
      if (err !== undefined) return `is not valid YAML: ${err.message.split('\n')[0] ?? err.code}`;
    }
  } catch (e) {
    return `is not valid YAML: ${e instanceof Error ? e.message : String(e)}`;
  }
  return undefined;
}

const TOOL_NAME_RE = new RegExp(TOOL_NAME_PATTERN);
const SERVER_RE = new RegExp(MCP_SERVER_NAME_PATTERN);

/**
 * `spec.toolPins` and `spec.unpinnedTools` (ADR 0043): each pin a valid tool name (what the gateway
 * accepts), an optional valid server name and a `sha256:` digest; at most one pin per (server, name
 * ignoring case), since the gateway matches names ignoring case. Client-side only: a pin for a server
 * other than `appliesTo.mcpServer` can never match, and is refused as a likely mistake.
 */
function toolPinProblems(spec: ToolPolicySpec, opts: ValidateOptions): Array<{ field: string; message: string }> {
  const out: Array<{ field: string; message: string }> = [];
  const u = spec.unpinnedTools as unknown;
  if (u !== undefined && u !== 'Allow' && u !== 'Deny') out.push({ field: 'spec.unpinnedTools', message: 'must be Allow or Deny' });
  const pins = spec.toolPins as unknown;
  if (pins === undefined) return out;
  if (!Array.isArray(pins)) return [...out, { field: 'spec.toolPins', message: 'must be a list of {name, server?, digest}' }];
  if (pins.length > MAX_TOOL_PINS) out.push({ field: 'spec.toolPins', message: `must have at most ${MAX_TOOL_PINS} items` });
  const seen = new Map<string, number>();
  const scope = spec.appliesTo?.mcpServer;
  pins.forEach((p: unknown, i) => {
    const at = `spec.toolPins[${i}]`;
    if (typeof p !== 'object' || p === null || Array.isArray(p)) return void out.push({ field: at, message: 'must be an object' });
    const { name, server, digest } = p as Record<string, unknown>;
    for (const k of Object.keys(p))
      if (k !== 'name' && k !== 'server' && k !== 'digest') out.push({ field: `${at}.${k}`, message: 'unknown field' });
    if (typeof name !== 'string' || name === '') out.push({ field: `${at}.name`, message: 'is required (the tool name as listed)' });
    else if (name.length > 128 || !TOOL_NAME_RE.test(name))
      out.push({ field: `${at}.name`, message: 'must be 1 to 128 characters from A-Z a-z 0-9 _ - . / : (a name the gateway accepts)' });
    if (server !== undefined && (typeof server !== 'string' || !SERVER_RE.test(server)))
      out.push({ field: `${at}.server`, message: 'must be an MCP server name (lower-case letters, digits, ".", "_", "-")' });
    else if (opts.clientSide === true && typeof server === 'string' && scope !== undefined && scope !== '*' && scope !== server)
      out.push({
        field: `${at}.server`,
        message: `names ${server}, but the policy applies only to MCP server ${scope}: the pin could never match`,
      });
    if (!isToolDigest(digest)) out.push({ field: `${at}.digest`, message: 'must be sha256: followed by 64 lower-case hex digits' });
    if (typeof name === 'string') {
      const key = `${typeof server === 'string' ? server : ''}\u0000${name.toLowerCase()}`;
      const first = seen.get(key);
      if (first !== undefined)
        out.push({
          field: `${at}.name`,
          message: `pins ${name} again (spec.toolPins[${first}]); names are matched ignoring case, one pin per server and name`,
        });
      else seen.set(key, i);
    }
  });
  return out;
}

/** ToolPolicy: agtProfile inline XOR bundleRef, inline parses as YAML, monthlyCap ≥ dailyCap, money formats. */
export function validateToolPolicySpec(spec: ToolPolicySpec, opts: ValidateOptions = {}): ValidationCause[] {
  const out: ValidationCause[] = [];
  const invalid = (field: string, message: string): void => {
    out.push({ field, message, reason: Reason.InvalidSpec });
  };
  const at = spec.appliesTo;
  const mode = enforcementProblem(spec.enforcement);
  if (mode !== undefined) invalid('spec.enforcement', mode);
  if (typeof at !== 'object' || at === null) invalid('spec.appliesTo', 'is required');
  else if (opts.clientSide === true) {
    const labels = at.sandboxMatchLabels ?? {};
    if ((at.tool ?? '') === '' && (at.mcpServer ?? '') === '' && Object.keys(labels).length === 0) {
      invalid('spec.appliesTo', 'must set at least one of tool, mcpServer or sandboxMatchLabels');
    }
  }
  for (const c of toolPinProblems(spec, opts)) invalid(c.field, c.message);
  const agt = spec.agtProfile;
  if (agt !== undefined) {
    const hasInline = agt.inline !== undefined;
    const hasBundle = agt.bundleRef !== undefined;
    if (hasInline && hasBundle) invalid('spec.agtProfile', 'inline and bundleRef are mutually exclusive: set exactly one');
    else if (!hasInline && !hasBundle) invalid('spec.agtProfile', 'must set exactly one of inline or bundleRef (or omit agtProfile)');
    if (hasInline) {
      if (typeof agt.inline !== 'string' || agt.inline === '') invalid('spec.agtProfile.inline', 'must be non-empty AGT YAML');
      else {
        const p = agtInlineProblem(agt.inline);
        if (p !== undefined) invalid('spec.agtProfile.inline', p);
      }
    }
  }
  const c = spec.commerce;
  if (c !== undefined) {
    const amounts = {} as Partial<Record<'dailyCap' | 'monthlyCap' | 'perTransferCap', { currency: string; milli: bigint }>>;
    for (const f of ['dailyCap', 'monthlyCap', 'perTransferCap'] as const) {
      const v = c[f];
      if (v === undefined) continue;
      const parsed = parseMoney(v);
      if (parsed === undefined)
        invalid(
          `spec.commerce.${f}`,
          `must be "<ISO 4217 code> <amount>" like "USD 100.00" (at most 3 decimals), got ${JSON.stringify(v)}`,
        );
      else amounts[f] = parsed;
    }
    const d = amounts.dailyCap;
    const m = amounts.monthlyCap;
    if (d !== undefined && m !== undefined) {
      if (d.currency !== m.currency)
        invalid('spec.commerce.monthlyCap', `must be in the same currency as dailyCap (${m.currency} vs ${d.currency})`);
      else if (m.milli < d.milli)
        invalid('spec.commerce.monthlyCap', `must be greater than or equal to dailyCap (${String(c.monthlyCap)} < ${String(c.dailyCap)})`);
    }
  }
  return out;
}

/**
 * EgressApproval: TTL grammar and ceiling, reason bytes and control characters, ticket length, hosts.
 * TTL causes carry `TtlInvalid` / `TtlExceedsCeiling`, reason causes `ReasonInvalid` (the frozen condition reasons);
 * the rest, which the CRD schema normally rejects first, carry `InvalidSpec`.
 */
export function validateEgressApprovalSpec(spec: EgressApprovalSpec, opts: ValidateOptions = {}): ValidationCause[] {
  const out: ValidationCause[] = [];
  if (typeof spec.sandbox !== 'string' || spec.sandbox === '')
    out.push({ field: 'spec.sandbox', message: 'must name a sandbox in the same namespace', reason: Reason.InvalidSpec });
  if (!Array.isArray(spec.hosts) || spec.hosts.length === 0) {
    out.push({ field: 'spec.hosts', message: `must list 1 to ${MAX_HOSTS} hosts`, reason: Reason.InvalidSpec });
  } else {
    if (spec.hosts.length > MAX_HOSTS)
      out.push({
        field: 'spec.hosts',
        message: `must list at most ${MAX_HOSTS} hosts, got ${spec.hosts.length}: split the approval`,
        reason: Reason.InvalidSpec,
      });
    checkEndpoints(spec.hosts, 'spec.hosts', out, Reason.InvalidSpec);
    const baseline = (opts.baseline ?? []).map((e) => e.host);
    spec.hosts.forEach((e, i) => {
      if (typeof e.host !== 'string' || hostProblem(e.host) !== undefined) return;
      // Without the baseline (the CLI) only too-wide wildcards are refused here; special addresses
      // need the baseline to decide, so the controller (which has it) refuses them.
      if (opts.baseline === undefined && canonicalHost(e.host)?.kind !== 'wildcard') return;
      const p = approvalHostProblem(e.host, baseline);
      if (p !== undefined) out.push({ field: `spec.hosts[${i}].host`, message: p, reason: Reason.InvalidSpec });
    });
  }
  const rp = reasonProblem(spec.reason);
  if (rp !== undefined) out.push({ field: 'spec.reason', message: rp, reason: Reason.ReasonInvalid });
  if (spec.ticket !== undefined) {
    const n = typeof spec.ticket === 'string' ? [...spec.ticket].length : 0;
    if (n < 1 || n > MAX_TICKET_CHARS)
      out.push({
        field: 'spec.ticket',
        message: `must be 1 to ${MAX_TICKET_CHARS} characters when set (omit it otherwise), got ${n}`,
        reason: Reason.InvalidSpec,
      });
  }
  const ttlText: unknown = spec.ttl;
  const ttl = typeof ttlText === 'string' ? parseTtl(ttlText) : undefined;
  const ceiling = ttlCeilingSeconds(opts.env ?? {});
  if (ttl === undefined) {
    out.push({
      field: 'spec.ttl',
      message: `must be an ISO 8601 duration P[nD][T[nH][nM][nS]] such as PT1H, got ${JSON.stringify(ttlText)}`,
      reason: Reason.TtlInvalid,
    });
  } else if (ttl <= 0) {
    out.push({ field: 'spec.ttl', message: 'must be greater than zero', reason: Reason.TtlInvalid });
  } else if (ttl > ceiling) {
    out.push({
      field: 'spec.ttl',
      message: `${String(ttlText)} exceeds the ceiling of ${formatTtl(ceiling)} (${ceiling}s)`,
      reason: Reason.TtlExceedsCeiling,
    });
  }
  return out;
}

/** KarsSandbox bindings: reference names and baseline endpoints. */
export function validateKarsSandboxSpec(spec: KarsSandboxSpec): ValidationCause[] {
  const out: ValidationCause[] = [];
  if (spec.inferenceRef !== undefined && (typeof spec.inferenceRef.name !== 'string' || spec.inferenceRef.name === '')) {
    out.push({
      field: 'spec.inferenceRef.name',
      message: 'must name an InferencePolicy in the same namespace',
      reason: Reason.InvalidSpec,
    });
  }
  if (spec.memoryRef !== undefined && (typeof spec.memoryRef.name !== 'string' || spec.memoryRef.name === '')) {
    out.push({ field: 'spec.memoryRef.name', message: 'must be non-empty', reason: Reason.InvalidSpec });
  }
  const eps = spec.networkPolicy?.allowedEndpoints;
  if (eps !== undefined) checkEndpoints(eps, 'spec.networkPolicy.allowedEndpoints', out, Reason.InvalidSpec);
  return out;
}

/** Validate any kars object by kind. */
export function validateObject(obj: KarsObject, opts: ValidateOptions = {}): ValidationCause[] {
  switch (obj.kind) {
    case 'InferencePolicy':
      return validateInferencePolicySpec(obj.spec);
    case 'ToolPolicy':
      return validateToolPolicySpec(obj.spec, opts);
    case 'EgressApproval':
      return validateEgressApprovalSpec(obj.spec, opts);
    case 'KarsSandbox':
      return validateKarsSandboxSpec(obj.spec);
  }
}

/** Throw {@link PolicyValidationError} listing every cause, or return the object unchanged when valid. */
export function assertValid<T extends KarsObject>(obj: T, opts: ValidateOptions = {}): T {
  const causes = validateObject(obj, opts);
  if (causes.length > 0) throw new PolicyValidationError(`${obj.kind} ${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`, causes);
  return obj;
}
