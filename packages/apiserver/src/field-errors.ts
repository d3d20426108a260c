/**
 * kube's field errors (apimachinery's `field.Required`, `field.Invalid`, `field.NotSupported`,
 * `field.Forbidden`) as the causes of a 422, worded as kube-apiserver words them. The per-kind
 * validation, request-option validation and CRD checks of kars apiserver build their causes here.
 */
import { goQuote } from '@kars/kube-core';
import type { StatusCause } from '@kars/kube-core';

/** A value as kube's field errors print it: strings quoted as Go quotes them, anything else as JSON. */
export const goValue = (v: unknown): string => (typeof v === 'string' ? goQuote(v) : (JSON.stringify(v) ?? 'null'));

/** field.Required: `Required value`. */
export const requiredCause = (field: string): StatusCause => ({ reason: 'FieldValueRequired', field, message: 'Required value' });

/** field.Invalid of a string value: `Invalid value: <value, as Go quotes it>: <why>`. */
export const invalidValue = (field: string, value: string, why: string): StatusCause => ({
  reason: 'FieldValueInvalid',
  field,
  message: `Invalid value: ${goQuote(value)}: ${why}`,
});

/** field.NotSupported: `Unsupported value: <value>: supported values: "a", "b"`. */
export const notSupportedCause = (field: string, value: unknown, supported: readonly string[]): StatusCause => ({
  reason: 'FieldValueNotSupported',
  field,
  message: `Unsupported value: ${goValue(value)}: supported values: ${supported.map(goQuote).join(', ')}`,
});

/** field.Forbidden: `Forbidden: <why>`. */
export const forbiddenCause = (field: string, why: string): StatusCause => ({
  reason: 'FieldValueForbidden',
  field,
  message: `Forbidden: ${why}`,
});
