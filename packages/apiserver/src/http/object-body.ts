import { ApiError, badRequest, isObject } from '@kars/kube-core';
import type { ResourceInfo } from '../registry/resource.js';
import type { PatchType } from '../service.js';
import type { FieldValidation } from '../admission.js';
import { decodeBody } from './body.js';
import { scanGoJson } from './go-json.js';
import { checkJsonDepth } from './limits.js';

/**
 * Decoding of create, update and patch bodies as kube-apiserver's handlers decode them, with
 * their refusals in kube's words: the request media types it accepts (415 otherwise), Go's JSON
 * syntax and type errors wrapped as the handler wraps them, and the duplicate keys its strict
 * decoder finds (`duplicate field "spec.size"`), which `JSON.parse` would silently merge.
 *
 * Guarantees: a JSON body is scanned once (go-json.ts) before `JSON.parse` builds it, within the
 * nesting limit of limits.ts. Caveats: YAML bodies keep the YAML library's messages (go-yaml's
 * parser wording cannot be derived from another parser); a number beyond float64 is refused with
 * the unstructured decoder's message, where kube names the Go struct field for a built-in kind.
 */

/** The request media types kube-apiserver decodes for create and update, in the order its 415 names them. */
export const WRITE_MEDIA_TYPES = ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf'];

/** A decoded JSON or YAML object body and the strict decoding errors found on the way (`duplicate field "…"`). */
export interface DecodedObject {
  value: unknown;
  strictErrors: string[];
}

/** The type Go's DefaultMetaFactory decodes a body into to find its apiVersion and kind. */
const FIND_KIND = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }';

/**
 * The media type of a create or update body (`application/json` when none is given), refused with
 * kube's 415 when it is not one kube-apiserver decodes (`text/plain`, a form).
 */
export function writeMediaType(contentType: string | undefined): string {
  if (contentType === undefined || contentType === '') return 'application/json';
  const mediaType = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  if (WRITE_MEDIA_TYPES.includes(mediaType)) return mediaType;
  throw new ApiError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${WRITE_MEDIA_TYPES.join(', ')}`,
  );
}

/** The JSON value of an object body for `ri`, refused with kube's messages; JSON or YAML by `mediaType`. */
export async function decodeObject(ri: ResourceInfo, raw: Buffer, mediaType: string): Promise<DecodedObject> {
  if (mediaType === 'application/yaml') return { value: await decodeBody(raw, mediaType), strictErrors: [] };
  if (!/\S/.test(raw.toString('utf8'))) throw badRequest('the request body is empty');
  checkJsonDepth(raw.toString('utf8'));
  const scan = scanGoJson(raw);
  if (scan.error !== undefined) throw unrecognized(ri, `couldn't get version/kind; json parse error: ${scan.error}`, raw);
  const value = JSON.parse(raw.toString('utf8')) as unknown;
  const typeError = findKindError(value);
  if (typeError !== undefined) throw unrecognized(ri, `couldn't get version/kind; json parse error: ${typeError}`, raw);
  if (scan.overflow !== undefined) {
    const o = value as Record<string, unknown>;
    const version = typeof o['apiVersion'] === 'string' ? (o['apiVersion'].split('/').pop() ?? '') : '';
    const kind = typeof o['kind'] === 'string' ? o['kind'] : ri.kind;
    throw badRequest(
      `${kind} in version ${JSON.stringify(version)} cannot be handled as a ${ri.kind}: json: cannot unmarshal number ${scan.overflow} into Go value of type float64`,
    );
  }
  return { value, strictErrors: scan.duplicates.map((p) => `duplicate field ${JSON.stringify(p)}`) };
}

/** The JSON value of a JSON, merge or strategic-merge patch, refused in the words of kube's patch handler. */
export function decodeJsonPatchBody(raw: Buffer, type: Exclude<PatchType, 'apply'>, fv: FieldValidation): unknown {
  const text = raw.toString('utf8');
  if (!/\S/.test(text)) throw badRequest('the request body is empty');
  checkJsonDepth(text);
  // kube decodes JSON and merge patches strictly (Warn, Strict) and wraps the error; a strategic patch's error is bare.
  const prefix = type === 'strategic' ? '' : 'error decoding patch: ';
  const scan = scanGoJson(raw);
  if (scan.error !== undefined) throw badRequest(`${prefix}${scan.error}`);
  const value = JSON.parse(text) as unknown;
  if (fv === 'Ignore' && type !== 'strategic') return value;
  const typeError =
    type === 'json' ? jsonPatchTypeError(value) : isObject(value) ? undefined : cannotUnmarshal(value, 'map[string]interface {}');
  if (typeError !== undefined) throw badRequest(`${prefix}${typeError}`);
  return value;
}

/** Go's name for the JSON type of `v` in an UnmarshalTypeError. */
function goJsonType(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'boolean') return 'bool';
  return typeof v;
}

function cannotUnmarshal(v: unknown, goType: string): string {
  return `json: cannot unmarshal ${goJsonType(v)} into Go value of type ${goType}`;
}

/** Go's error decoding `v` into DefaultMetaFactory's struct: not an object, or an apiVersion or kind that is not a string. */
function findKindError(v: unknown): string | undefined {
  if (v === null) return undefined;
  if (!isObject(v)) return cannotUnmarshal(v, FIND_KIND);
  for (const [key, field] of Object.entries(v)) {
    // encoding/json matches a key to a struct field case-insensitively.
    const name = key.toLowerCase() === 'apiversion' ? 'apiVersion' : key.toLowerCase() === 'kind' ? 'kind' : undefined;
    if (name !== undefined && field !== null && typeof field !== 'string')
      return `json: cannot unmarshal ${goJsonType(field)} into Go struct field .${name} of type string`;
  }
  return undefined;
}

/** Go's error decoding a JSON patch into kube's `[]handlers.jsonPatchOp`. */
function jsonPatchTypeError(v: unknown): string | undefined {
  if (v === null) return undefined;
  if (!Array.isArray(v)) return cannotUnmarshal(v, '[]handlers.jsonPatchOp');
  for (const op of v as unknown[]) {
    if (op === null) continue;
    if (!isObject(op)) return cannotUnmarshal(op, 'handlers.jsonPatchOp');
    for (const [key, field] of Object.entries(op)) {
      const name = ['op', 'path', 'from'].find((f) => f === key.toLowerCase());
      if (name !== undefined && field !== null && typeof field !== 'string')
        return `json: cannot unmarshal ${goJsonType(field)} into Go struct field jsonPatchOp.${name} of type string`;
    }
  }
  return undefined;
}

/** kube's transformDecodeError for a body whose kind could not be read: the kind expected, Go's error and the body's start. */
function unrecognized(ri: ResourceInfo, err: string, raw: Buffer): ApiError {
  return badRequest(`the object provided is unrecognized (must be of type ${ri.kind}): ${err} (${summarize(raw, 30)})`);
}

/** kube's summarizeData: the first `max` bytes, as text when the body starts with `{`, else in hex; ` ...` when cut. */
function summarize(raw: Buffer, max: number): string {
  if (raw.length === 0) return '<empty>';
  const cut = raw.length > max;
  const head = raw.subarray(0, max);
  const more = cut ? ' ...' : '';
  if (raw[0] !== 0x7b) return head.toString('hex') + more;
  // Go writes each byte of a UTF-8 sequence cut short as one U+FFFD; Node writes one for the whole sequence.
  let keep = head.length;
  while (keep > 0 && keep > head.length - 4 && ((head[keep - 1] ?? 0) & 0xc0) === 0x80) keep--;
  const lead = head[keep - 1] ?? 0;
  const width = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  if (keep > 0 && lead >= 0xc0 && keep - 1 + width > head.length)
    return head.subarray(0, keep - 1).toString('utf8') + '\ufffd'.repeat(head.length - keep + 1) + more;
  return head.toString('utf8') + more;
}
