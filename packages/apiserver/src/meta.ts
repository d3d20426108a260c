import { randomBytes } from 'node:crypto';
import { cloneJson, isObject } from '@kars/kube-core';
import type { KubeObject, StatusCause } from '@kars/kube-core';
import { invalidValue } from './field-errors.js';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
/** Most bytes the keys and values of an object's annotations may hold together (kube's TotalAnnotationSizeLimitB). */
const MAX_ANNOTATION_BYTES = 256 * 1024;

/** RFC 3339 timestamp with second precision, as Kubernetes writes metadata times. */
export function nowRfc3339(): string {
  // Every write stamps one or two times; within one second the string is the same.
  const sec = Math.floor(Date.now() / 1000);
  if (sec !== lastSec) {
    lastSec = sec;
    lastRfc3339 = new Date(sec * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  }
  return lastRfc3339;
}
let lastSec = NaN;
let lastRfc3339 = '';

/** The RFC 3339 time with microseconds, as kube writes MicroTime fields. */
export function nowMicro(): string {
  return new Date().toISOString().replace(/Z$/, '000Z');
}

/** Five random lowercase alphanumerics, as generateName appends. */
export function randomSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  const bytes = randomBytes(5);
  return [...bytes].map((b) => alphabet[b % alphabet.length]).join('');
}

// apimachinery's validation messages, word for word (k8s.io/apimachinery/pkg/util/validation).
const DNS_SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS_LABEL_MSG =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS_1035_LABEL_MSG =
  "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART_MSG =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/** apimachinery's IsDNS1123Label: the problems of `value` as a label (none when it is one). */
export function dns1123LabelProblems(value: string): string[] {
  const out: string[] = [];
  if (value.length > 63) out.push('must be no more than 63 characters');
  if (!DNS_LABEL.test(value)) out.push(DNS_LABEL_MSG);
  return out;
}

/** validateOwnerReference for each of `metadata.ownerReferences` (kube's path names no index). */
function ownerReferenceCauses(obj: KubeObject): StatusCause[] {
  const refs = obj.metadata.ownerReferences;
  if (!Array.isArray(refs)) return [];
  const causes: StatusCause[] = [];
  const at = 'metadata.ownerReferences';
  for (const raw of refs as unknown[]) {
    const r = isObject(raw) ? raw : {};
    const str = (k: string): string => (typeof r[k] === 'string' ? (r[k] as string) : '');
    const apiVersion = str('apiVersion');
    // schema.ParseGroupVersion: `v`, `g/v`; anything with more slashes has no version.
    const parts = apiVersion.split('/');
    const version = parts.length === 1 ? parts[0]! : parts.length === 2 ? parts[1]! : '';
    if (version === '') causes.push(invalidValue(`${at}.apiVersion`, apiVersion, 'version must not be empty'));
    if (str('kind') === '') causes.push(invalidValue(`${at}.kind`, '', 'must not be empty'));
    if (str('name') === '') causes.push(invalidValue(`${at}.name`, '', 'must not be empty'));
    if (str('uid') === '') causes.push(invalidValue(`${at}.uid`, '', 'must not be empty'));
  }
  return causes;
}

/** Check metadata fields that kube-apiserver validates on every object. */
export function validateMeta(
  obj: KubeObject,
  opts: { namespaced: boolean; nameIsLabel: boolean; nameIsDns1035Label?: boolean; namePathSegment?: boolean },
): StatusCause[] {
  const causes: StatusCause[] = [];
  const m = obj.metadata;
  const name = m.name ?? '';
  if (name === '') {
    causes.push({ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' });
  } else if (opts.namePathSegment) {
    // kube's ValidatePathSegmentName (RBAC objects: "system:discovery" is a valid name)
    if (name === '.' || name === '..' || name.includes('/') || name.includes('%')) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.name',
        message: `Invalid value: "${name}": may not be '.' or '..' and may not contain '/' or '%'`,
      });
    }
  } else if (opts.nameIsDns1035Label) {
    // kube's ValidateServiceName.
    if (!DNS_1035_LABEL.test(name) || name.length > 63)
      causes.push({ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": ${DNS_1035_LABEL_MSG}` });
  } else {
    const re = opts.nameIsLabel ? DNS_LABEL : DNS_SUBDOMAIN;
    if (!re.test(name) || name.length > (opts.nameIsLabel ? 63 : 253)) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.name',
        message: `Invalid value: "${name}": ${opts.nameIsLabel ? DNS_LABEL_MSG : DNS_SUBDOMAIN_MSG}`,
      });
    }
  }
  for (const [k, v] of Object.entries(m.labels ?? {})) {
    if (!QUALIFIED_NAME.test(k))
      causes.push({
        reason: 'FieldValueInvalid',
        field: `metadata.labels`,
        message: `Invalid value: "${k}": ${NAME_PART_MSG}`,
      });
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v))
      causes.push({
        reason: 'FieldValueInvalid',
        field: `metadata.labels`,
        message: `Invalid value: "${String(v)}": ${LABEL_VALUE_MSG}`,
      });
  }
  for (const [k, v] of Object.entries(m.annotations ?? {})) {
    if (!QUALIFIED_NAME.test(k))
      causes.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.annotations',
        message: `Invalid value: "${k}": ${NAME_PART_MSG}`,
      });
    if (typeof v !== 'string')
      causes.push({ reason: 'FieldValueTypeInvalid', field: `metadata.annotations[${k}]`, message: 'must be a string' });
  }
  // kube's ValidateAnnotationsSize: keys and values together, in UTF-8 bytes.
  let annotationBytes = 0;
  for (const [k, v] of Object.entries(m.annotations ?? {})) annotationBytes += Buffer.byteLength(k) + Buffer.byteLength(String(v));
  if (annotationBytes > MAX_ANNOTATION_BYTES)
    causes.push({
      reason: 'FieldValueTooLong',
      field: 'metadata.annotations',
      message: `Too long: may not be more than ${MAX_ANNOTATION_BYTES} bytes`,
    });
  if (
    m.finalizers !== undefined &&
    (!Array.isArray(m.finalizers) || m.finalizers.some((f) => typeof f !== 'string' || !QUALIFIED_NAME.test(f)))
  ) {
    causes.push({ reason: 'FieldValueInvalid', field: 'metadata.finalizers', message: 'each finalizer must be a qualified name' });
  }
  causes.push(...ownerReferenceCauses(obj));
  return causes;
}

/** Structural checks on a decoded body: it must be an object with object metadata. */
export function shapeCauses(body: unknown): StatusCause[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return [{ reason: 'FieldValueTypeInvalid', field: '', message: 'the body must be a JSON object' }];
  const m = (body as Record<string, unknown>)['metadata'];
  if (m !== undefined && (typeof m !== 'object' || m === null || Array.isArray(m)))
    return [{ reason: 'FieldValueTypeInvalid', field: 'metadata', message: 'must be an object' }];
  const labels = (m as Record<string, unknown> | undefined)?.['labels'];
  if (labels !== undefined && labels !== null && (typeof labels !== 'object' || Array.isArray(labels)))
    return [{ reason: 'FieldValueTypeInvalid', field: 'metadata.labels', message: 'must be a map of strings' }];
  return [];
}

/** Deep copy of a JSON value (kube-core's `cloneJson`: much cheaper than structuredClone). */
export function clone<T>(v: T): T {
  return cloneJson(v);
}
