/**
 * The request options kube-apiserver validates before it touches storage (apimachinery's
 * `ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`, `ValidateDeleteOptions`
 * and `ValidateListOptions`), with kube's answers: a 422 whose details name the options kind in
 * `meta.k8s.io` (`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: …`), the
 * causes in kube's order. Found by the differential suite (issue 19); each check has a regression
 * test in options.test.ts.
 */
import { ApiError, badRequest, goQuote, invalid, isGoPrintable } from '@kars/kube-core';
import type { FieldRequirement, StatusCause } from '@kars/kube-core';
import { forbiddenCause as forbidden, notSupportedCause as notSupported } from '../field-errors.js';
import { OBJECT_META_FIELD_LABELS } from '../registry/resource.js';
import type { ResourceInfo } from '../registry/resource.js';

/** The options kinds a request's query (or DeleteOptions body) decodes to. */
export type OptionsKind = 'CreateOptions' | 'UpdateOptions' | 'PatchOptions' | 'DeleteOptions' | 'ListOptions';

/** kube's FieldManagerMaxLength. */
const FIELD_MANAGER_MAX_BYTES = 128;

/** Throw kube's 422 for `kind` when there are causes. */
function refuseIfAny(kind: OptionsKind, causes: StatusCause[]): void {
  if (causes.length > 0) throw invalid({ group: 'meta.k8s.io', resource: kind.toLowerCase(), kind, name: '' }, causes);
}

/** ValidateFieldManager: at most 128 bytes, and every character printable (one cause per other character, at its byte offset). */
function fieldManagerCauses(manager: string | null): StatusCause[] {
  if (manager === null) return [];
  const causes: StatusCause[] = [];
  if (Buffer.byteLength(manager) > FIELD_MANAGER_MAX_BYTES)
    causes.push({
      reason: 'FieldValueTooLong',
      field: 'fieldManager',
      message: `Too long: may not be more than ${FIELD_MANAGER_MAX_BYTES} bytes`,
    });
  let offset = 0;
  for (const ch of manager) {
    if (!isGoPrintable(ch)) {
      const u = `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
      causes.push({
        reason: 'FieldValueInvalid',
        field: 'fieldManager',
        message: `Invalid value: ${goQuote(manager)}: invalid character ${u} (at position ${offset})`,
      });
    }
    offset += Buffer.byteLength(ch);
  }
  return causes;
}

function dryRunCauses(values: readonly string[]): StatusCause[] {
  if (values.every((v) => v === 'All')) return [];
  return [notSupported('dryRun', values, ['All'])];
}

function fieldValidationCauses(v: string | null): StatusCause[] {
  if (v === null || v === '' || v === 'Ignore' || v === 'Strict' || v === 'Warn') return [];
  return [notSupported('fieldValidation', v, ['', 'Ignore', 'Strict', 'Warn'])];
}

/**
 * The options of a create, update or patch (`dryRun`, `fieldManager`, `fieldValidation`, and for a
 * patch `force`), from the query; throws kube's 422 when they are invalid.
 */
export function validateWriteOptions(kind: 'CreateOptions' | 'UpdateOptions' | 'PatchOptions', q: URLSearchParams, apply = false): void {
  const causes: StatusCause[] = [];
  if (kind === 'PatchOptions') {
    // `force` is a *bool: any value given counts as set.
    if (!apply && q.has('force')) causes.push(forbidden('force', 'may not be specified for non-apply patch'));
    if (apply && !q.get('fieldManager'))
      causes.push({ reason: 'FieldValueRequired', field: 'fieldManager', message: 'Required value: is required for apply patch' });
  }
  causes.push(...fieldManagerCauses(q.get('fieldManager')));
  causes.push(...dryRunCauses(q.getAll('dryRun')));
  causes.push(...fieldValidationCauses(q.get('fieldValidation')));
  refuseIfAny(kind, causes);
}

/** A delete's `propagationPolicy` and `dryRun` (from the body's DeleteOptions or the query); throws kube's 422 when invalid. */
export function validateDeleteOptions(propagationPolicy: string | undefined, dryRun: readonly string[]): void {
  const causes: StatusCause[] = [];
  if (propagationPolicy !== undefined && !['Foreground', 'Background', 'Orphan'].includes(propagationPolicy))
    causes.push(notSupported('propagationPolicy', propagationPolicy, ['Foreground', 'Background', 'Orphan', 'nil']));
  causes.push(...dryRunCauses(dryRun));
  refuseIfAny('DeleteOptions', causes);
}

/**
 * A list's or watch's `resourceVersion`, `resourceVersionMatch`, `sendInitialEvents` and
 * `continue`, as kube's ValidateListOptions judges them; throws kube's answer when invalid.
 */
export function validateListOptions(q: URLSearchParams, watch: boolean): void {
  const rv = q.get('resourceVersion') ?? '';
  const match = q.get('resourceVersionMatch') ?? '';
  const hasContinue = (q.get('continue') ?? '') !== '';
  const sendInitial = q.has('sendInitialEvents');
  const causes: StatusCause[] = [];
  if (watch) {
    if (sendInitial && match !== 'NotOlderThan')
      causes.push(forbidden('resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'));
    if (match !== '') {
      if (!sendInitial)
        causes.push(forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'));
      if (match !== 'NotOlderThan') causes.push(notSupported('resourceVersionMatch', match, ['NotOlderThan']));
      if (hasContinue) causes.push(forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden when continue is provided'));
    }
  } else {
    if (match !== '') {
      if (rv === '') causes.push(forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden unless resourceVersion is provided'));
      if (hasContinue) causes.push(forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden when continue is provided'));
      if (match !== 'Exact' && match !== 'NotOlderThan')
        causes.push(notSupported('resourceVersionMatch', match, ['Exact', 'NotOlderThan', '']));
      if (match === 'Exact' && rv === '0')
        causes.push(forbidden('resourceVersionMatch', 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'));
    }
    if (sendInitial) causes.push(forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'));
  }
  refuseIfAny('ListOptions', causes);
}

/** Go's strconv.ParseUint(s, 10, 64) failure text, or undefined when `s` parses. */
function parseUintError(s: string): string | undefined {
  if (!/^[0-9]+$/.test(s)) return `strconv.ParseUint: parsing ${goQuote(s)}: invalid syntax`;
  if (BigInt(s) > 0xffff_ffff_ffff_ffffn) return `strconv.ParseUint: parsing ${goQuote(s)}: value out of range`;
  return undefined;
}

/**
 * A list's `resourceVersion` as a revision (undefined when unset), or kube's answer to one that
 * is not a revision: 400 for a list, a reasonless 500 for a watch (as kube-apiserver answers).
 */
export function requestedRevision(q: URLSearchParams, watch: boolean): number | undefined {
  const rv = q.get('resourceVersion');
  if (rv === null || rv === '') return undefined;
  const err = parseUintError(rv);
  if (err === undefined) return Number(rv);
  const text = `resourceVersion: Invalid value: ${goQuote(rv)}: ${err}`;
  if (watch) throw new ApiError(500, '', text);
  throw badRequest(`invalid resource version: ${text}`);
}

/**
 * kube's answer to a list at a revision the server has not reached: 504 "Too large resource
 * version". kube-apiserver first waits up to 3 s for its watch cache to catch up; kars apiserver's
 * store is its cache, so a revision past the current one cannot arrive by waiting, and it answers at once.
 */
export function refuseFutureRevision(requested: number | undefined, current: number): void {
  if (requested === undefined || requested <= current) return;
  throw new ApiError(504, 'Timeout', `Timeout: Too large resource version: ${requested}, current: ${current}`, {
    causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
    retryAfterSeconds: 1,
  });
}

/**
 * Refuse a field selector on a label the kind does not support, with kube's 400: a custom resource
 * supports `metadata.name`, `metadata.namespace` and its version's `selectableFields`; a built-in its
 * registered labels, or else kube's default pair (a message of its own).
 */
export function checkFieldLabels(ri: ResourceInfo, version: string, fields: readonly FieldRequirement[]): void {
  // A built-in without labels of its own has kube's default conversion, whose refusal lists the pair.
  const byDefault = ri.builtin && ri.fieldLabels === undefined;
  const supported = ri.builtin
    ? (ri.fieldLabels ?? OBJECT_META_FIELD_LABELS)
    : [...OBJECT_META_FIELD_LABELS, ...(ri.versions.find((v) => v.name === version)?.selectableFields ?? [])];
  for (const { field } of fields) {
    if (supported.includes(field)) continue;
    throw badRequest(
      byDefault
        ? `${goQuote(field)} is not a known field selector: only "metadata.name", "metadata.namespace"`
        : `field label not supported: ${field}`,
    );
  }
}
