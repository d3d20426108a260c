/**
 * The decision record: one line of the router's decision log for every decision it makes on agent
 * traffic (an inference request allowed, refused or capped; a tool call allowed or refused, or a
 * tool hidden from a `tools/list` answer; an egress CONNECT or HTTP request allowed or refused),
 * bound to the policies of the snapshot that decided it. ADR 0040 has the form and its reasons.
 *
 * Guarantees: the field order of every record is fixed (the log hashes the line as written, so a
 * record's bytes are its identity); strings an agent controls (model, tool, host) are cut to
 * {@link MAX_TARGET_CHARS} so one request cannot make a record of unbounded size.
 */
import type { EchoKind } from '@kars/policy-api';

/** What a decision was about. */
export type DecisionKind = 'inference' | 'tool' | 'egress';

/** `allow`: passed as asked; `deny`: refused (or, for a tool in a list, hidden); `cap`: passed with a limit the router set. */
export type DecisionVerdict = 'allow' | 'deny' | 'cap';

/** One policy of the snapshot that decided: the kind, its name (null when the router cannot know it), generation (null when the compiled form does not carry it) and digest (null: none bound). */
export interface PolicyRef {
  kind: EchoKind;
  name: string | null;
  generation: number | null;
  digest: string | null;
}

/** The target of an inference decision. */
export interface InferenceTarget {
  /** The API asked (`chat.completions`, `responses`, `messages`, …), or the path when no API matched. */
  api: string;
  /** The request's `model`, as the agent sent it (cut); null when none was read. */
  model: string | null;
  /** The provider and deployment the request went to; null when it was not forwarded. */
  provider: string | null;
  deployment: string | null;
}

/** The target of a tool decision. */
export interface ToolTarget {
  /** The MCP server's name; null for the unnamed `/mcp`. */
  server: string | null;
  tool: string;
  /** `call`: a `tools/call`; `list`: a tool in a `tools/list` answer (only hidden ones are recorded). */
  action: 'call' | 'list';
}

/** The target of an egress decision. */
export interface EgressTarget {
  host: string;
  port: number;
  via: 'CONNECT' | 'HTTP';
}

/** Tokens an inference decision reserved against the budget and charged when it settled. */
export interface DecisionTokens {
  reserved: number;
  charged: number;
}

/** One decision, as the log writes it (without the chain's `seq` and `prev`, which the log adds). */
export interface DecisionRecord {
  type: 'decision';
  /** RFC 3339 with milliseconds, from the router's wall clock, when the decision was recorded. */
  time: string;
  sandbox: string;
  /** The router instance (its echo lease identity). */
  instance: string;
  /** The router's id for the request (`x-kars-request-id` on inference and MCP answers). */
  requestId: string;
  kind: DecisionKind;
  target: InferenceTarget | ToolTarget | EgressTarget;
  decision: DecisionVerdict;
  /** A stable code: `allowed`, `completion_limit_set`, a refusal's `error.code`, `hidden`, `denied`, … */
  reason: string;
  /** Inference only, when the API is charged. */
  tokens: DecisionTokens | null;
  /** The policies of the snapshot that decided, for this kind; for a dry-run record, the dry-run policy. */
  policies: readonly PolicyRef[];
  /**
   * `DryRun` (ADR 0050): what a dry-run policy would have decided; the request was decided by the
   * enforced policies, in their own record. Absent on an enforced decision.
   */
  mode?: 'DryRun';
}

/** A chain record that is not a decision: the log's start, and a gap of records dropped (ADR 0040). */
export interface ChainEvent {
  type: 'start' | 'gap';
  time: string;
  sandbox: string;
  instance: string;
  /** `gap` only: how many decisions were dropped because the log could not keep up. */
  dropped?: number;
  /** `start` only: the previous file ended in a partial line (the process stopped mid-write). */
  truncatedTail?: boolean;
}

/** A line of the log: a record or an event, with its place in the chain. */
export type ChainLine = { seq: number; prev: string | null } & (DecisionRecord | ChainEvent);

/** Longest agent-controlled string kept in a record. */
export const MAX_TARGET_CHARS = 256;

/** `s` cut to {@link MAX_TARGET_CHARS}. */
export function cut(s: string): string {
  return s.length <= MAX_TARGET_CHARS ? s : s.slice(0, MAX_TARGET_CHARS);
}

/** The response header naming the digests that decided an inference or MCP request. */
export const POLICY_DIGEST_HEADER = 'x-kars-policy-digest';
/** The response header carrying the router's id for the request (the record's `requestId`). */
export const REQUEST_ID_HEADER = 'x-kars-request-id';

/**
 * The value of {@link POLICY_DIGEST_HEADER} for `refs`: `Kind=digest` pairs joined by `, `, in the
 * order given, with `none` for a kind with no policy bound, e.g.
 * `ToolPolicy=sha256:ab…, AgtProfile=none`.
 */
export function digestHeaderValue(refs: readonly PolicyRef[]): string {
  return refs.map((r) => `${r.kind}=${r.digest ?? 'none'}`).join(', ');
}
