import type { Status, StatusCause, StatusDetails } from './types.js';

/** Stable reasons, as kube-apiserver spells them. */
export type StatusReason =
  | 'BadRequest'
  | 'Unauthorized'
  | 'Forbidden'
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Gone'
  | 'Expired'
  | 'Invalid'
  | 'MethodNotAllowed'
  | 'NotAcceptable'
  | 'UnsupportedMediaType'
  | 'RequestEntityTooLarge'
  | 'TooManyRequests'
  | 'ServiceUnavailable'
  | 'Timeout'
  | 'InternalError'
  /** kube's StatusReasonUnknown: the Status carries no reason (kube-apiserver answers some 500s so). */
  | '';

/**
 * An API failure that maps one-to-one onto a metav1.Status.
 * `code` is the HTTP status; `reason` is the stable machine-readable reason.
 */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: StatusReason;
  readonly details: StatusDetails | undefined;

  constructor(code: number, reason: StatusReason, message: string, details?: StatusDetails, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ApiError';
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  /** The metav1.Status body for this error. */
  toStatus(): Status {
    const s: Status = {
      apiVersion: 'v1',
      kind: 'Status',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.reason === '') delete s.reason;
    if (this.details !== undefined) s.details = this.details;
    return s;
  }
}

/** What an object is, for error messages: `configmaps "x"` or `widgets.example.com "x"`. */
export interface ErrorTarget {
  group: string;
  resource: string;
  name: string;
  kind?: string;
}

function qualified(t: ErrorTarget): string {
  return t.group === '' ? t.resource : `${t.resource}.${t.group}`;
}

/**
 * kube's StatusDetails for a GroupResource error (NotFound, AlreadyExists, Conflict): `kind` holds the
 * resource (`configmaps`), and an empty group is omitted (Go's omitempty), as kube-apiserver answers.
 */
function details(t: ErrorTarget, causes?: StatusCause[]): StatusDetails {
  const d: StatusDetails = { name: t.name };
  if (t.group !== '') d.group = t.group;
  d.kind = t.resource;
  if (causes !== undefined) d.causes = causes;
  return d;
}

export function notFound(t: ErrorTarget): ApiError {
  return new ApiError(404, 'NotFound', `${qualified(t)} "${t.name}" not found`, details(t));
}

export function alreadyExists(t: ErrorTarget): ApiError {
  return new ApiError(409, 'AlreadyExists', `${qualified(t)} "${t.name}" already exists`, details(t));
}

export function conflict(t: ErrorTarget, why: string, causes?: StatusCause[]): ApiError {
  return new ApiError(409, 'Conflict', `Operation cannot be fulfilled on ${qualified(t)} "${t.name}": ${why}`, details(t, causes));
}

/** One field error as Go's field.Error prints it: `field: message`, `<nil>: message` without a field. */
export function causeText(c: StatusCause): string {
  return `${c.field ? c.field : '<nil>'}: ${c.message ?? c.reason ?? 'invalid'}`;
}

/**
 * kube's NewInvalid: the message names the GroupKind (`Lease.coordination.k8s.io "x" is invalid: …`)
 * and joins several causes as Go's aggregate does (`[a, b]`); details carry the kind, not the resource.
 */
export function invalid(t: ErrorTarget, causes: StatusCause[]): ApiError {
  const kind = t.kind ?? t.resource;
  // Go's ErrorList.ToAggregate drops repeated messages (the causes keep them all).
  const texts = [...new Set(causes.map(causeText))];
  const list = texts.length === 1 ? texts[0]! : `[${texts.join(', ')}]`;
  const d: StatusDetails = {};
  if (t.name !== '') d.name = t.name;
  if (t.group !== '') d.group = t.group;
  // Go's StatusDetails omits an empty kind (a review's decoded object has none).
  if (kind !== '') d.kind = kind;
  d.causes = causes;
  const qualifiedKind = t.group === '' ? kind : `${kind}.${t.group}`;
  return new ApiError(422, 'Invalid', `${qualifiedKind} "${t.name}" is invalid: ${list}`, d);
}

export function badRequest(message: string, cause?: unknown): ApiError {
  return new ApiError(400, 'BadRequest', message, undefined, { cause });
}

export function expired(message: string): ApiError {
  return new ApiError(410, 'Expired', message);
}

export function internalError(message: string, cause?: unknown): ApiError {
  return new ApiError(500, 'InternalError', `Internal error occurred: ${message}`, undefined, { cause });
}

/** Coerce anything thrown into an ApiError (unknown failures become 500). */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  return internalError(msg, err);
}
