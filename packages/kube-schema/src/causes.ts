/** Field-level causes in kube-apiserver's wording (k8s.io/apimachinery field.Error.ErrorBody). */

export type CauseReason =
  | 'FieldValueInvalid'
  | 'FieldValueRequired'
  | 'FieldValueNotSupported'
  | 'FieldValueTypeInvalid'
  | 'FieldValueForbidden'
  | 'FieldValueTooLong'
  | 'FieldValueDuplicate'
  | 'FieldValueTooMany'
  | 'TooMany';

export interface SchemaCause {
  reason: CauseReason;
  message: string;
  /** kube-style path: "spec.replicas", "spec.items[2].name", "spec.map[key]"; "" for the root. */
  field: string;
}

/** Thrown by compileSchema when the CRD schema itself is unacceptable. */
export class SchemaError extends Error {
  readonly code = 'KARS_SCHEMA_INVALID';
  readonly causes: SchemaCause[];
  constructor(causes: SchemaCause[]) {
    const first = causes[0];
    const head = first === undefined ? 'invalid schema' : `${first.field}: ${first.message}`;
    super(causes.length > 1 ? `${head} (and ${causes.length - 1} more)` : head);
    this.name = 'SchemaError';
    this.causes = causes;
  }
}

const MAX_RENDERED = 256;

/** Render a bad value the way field.Error does: strings quoted, scalars bare, composites as JSON. */
export function renderValue(value: unknown): string {
  let s: string;
  if (value === null || value === undefined) s = 'null';
  else if (typeof value === 'string') s = JSON.stringify(value.length > MAX_RENDERED ? value.slice(0, MAX_RENDERED) + '...' : value);
  else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') s = String(value);
  else s = safeJson(value);
  return s.length > MAX_RENDERED * 2 ? s.slice(0, MAX_RENDERED * 2) + '...' : s;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch {
    return '"<unrenderable>"';
  }
}

/** The JSON type name of a value, as go-openapi reports it. */
export function typeName(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  if (typeof value === 'object') return 'object';
  return typeof value;
}

export const required = (field: string, detail = ''): SchemaCause => ({
  reason: 'FieldValueRequired',
  message: detail === '' ? 'Required value' : `Required value: ${detail}`,
  field,
});

export const invalid = (field: string, value: unknown, detail: string): SchemaCause => ({
  reason: 'FieldValueInvalid',
  message: `Invalid value: ${renderValue(value)}: ${detail}`,
  field,
});

export const typeInvalid = (field: string, value: unknown, detail: string): SchemaCause => ({
  reason: 'FieldValueTypeInvalid',
  message: `Invalid value: ${renderValue(value)}: ${detail}`,
  field,
});

export const notSupported = (field: string, value: unknown, supported: readonly unknown[]): SchemaCause => ({
  reason: 'FieldValueNotSupported',
  message: `Unsupported value: ${renderValue(value)}: supported values: ${supported.map(renderValue).join(', ')}`,
  field,
});

export const forbidden = (field: string, detail: string): SchemaCause => ({
  reason: 'FieldValueForbidden',
  message: `Forbidden: ${detail}`,
  field,
});

export const tooLong = (field: string, max: number): SchemaCause => ({
  reason: 'FieldValueTooLong',
  message: `Too long: may not be more than ${max} bytes`,
  field,
});

export const tooMany = (field: string, actual: number, max: number, what: 'items' | 'properties'): SchemaCause => ({
  reason: 'FieldValueTooMany',
  message: `Too many: ${actual}: must have at most ${max} ${what}`,
  field,
});

export const duplicate = (field: string, value: unknown): SchemaCause => ({
  reason: 'FieldValueDuplicate',
  message: `Duplicate value: ${renderValue(value)}`,
  field,
});

/** Causes that make kube-apiserver skip CEL rules (strategy.go hasBlockingErr). */
export function isBlocking(c: SchemaCause): boolean {
  return (
    c.reason === 'FieldValueNotSupported' ||
    c.reason === 'FieldValueRequired' ||
    c.reason === 'FieldValueTooLong' ||
    c.reason === 'FieldValueTooMany' ||
    c.reason === 'TooMany' ||
    c.reason === 'FieldValueTypeInvalid'
  );
}
