import { ApiError } from '@kars/kube-core';
import type { ResourceInfo } from '../registry/resource.js';
import { decodeProtobuf, isProtobuf, PROTOBUF_MEDIA_TYPE } from '../protobuf/codec.js';
import { decodeBody } from './body.js';
import { decodeObject, writeMediaType } from './object-body.js';
import type { DecodedObject } from './object-body.js';

/**
 * Content negotiation for object requests: which request bodies are understood
 * (JSON, YAML, and Kubernetes protobuf for built-in kinds) and which responses a client accepts.
 *
 * kars answers in JSON. A client whose Accept list allows JSON (explicitly, through a wildcard,
 * or by sending no Accept at all) gets JSON even when it prefers protobuf, as kube-apiserver
 * would pick the first supported type. A client that accepts protobuf only gets 406.
 */

/** The message kube-apiserver's custom-resource handler gives for a body it cannot decode. */
const CR_UNSUPPORTED =
  'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml';

/** Decode a create/update body for a resource, by its Content-Type (415 for a media type kube does not decode). */
export async function decodeWriteBody(ri: ResourceInfo, raw: Buffer, contentType: string | undefined): Promise<DecodedObject> {
  const mediaType = writeMediaType(contentType);
  if (mediaType !== PROTOBUF_MEDIA_TYPE) return decodeObject(ri, raw, mediaType);
  if (!ri.builtin) throw new ApiError(415, 'UnsupportedMediaType', CR_UNSUPPORTED);
  return { value: decodeProtobuf(raw), strictErrors: [] };
}

/** Decode a body of any kind with a protobuf definition (the auth reviews, TokenRequest), JSON or YAML. */
export function decodeAnyBody(raw: Buffer, contentType: string | undefined): unknown {
  const mediaType = writeMediaType(contentType);
  return mediaType === PROTOBUF_MEDIA_TYPE ? decodeProtobuf(raw) : decodeBody(raw, mediaType);
}

/** Decode a DeleteOptions body (JSON or protobuf); an empty body means no options. */
export async function decodeDeleteOptions(raw: Buffer, contentType: string | undefined): Promise<Record<string, unknown>> {
  if (raw.length === 0) return {};
  if (isProtobuf(contentType)) return decodeProtobuf(raw);
  if (raw.toString('utf8').trim() === '') return {};
  return (await decodeBody(raw, 'application/json')) as Record<string, unknown>;
}

/**
 * Check that the client accepts a JSON response. Throws 406 NotAcceptable (a Status naming the
 * media types kars can produce) when the Accept list names only types kars does not produce.
 */
export function requireJsonAcceptable(accept: string | string[] | undefined): void {
  const header = Array.isArray(accept) ? accept.join(',') : accept;
  if (header === undefined || header.trim() === '') return;
  const ranges = header
    .split(',')
    .map((r) => (r.split(';')[0] ?? '').trim().toLowerCase())
    .filter((r) => r !== '');
  if (ranges.length === 0) return;
  const json = ranges.some(
    (r) => r === 'application/json' || r === 'application/*' || r === '*/*' || r === 'application/yaml' || r.endsWith('+json'),
  );
  if (json) return;
  if (ranges.includes(PROTOBUF_MEDIA_TYPE)) {
    throw new ApiError(
      406,
      'NotAcceptable',
      `only the following media types are accepted: application/json (kars apiserver does not encode ${PROTOBUF_MEDIA_TYPE} responses; add application/json to the Accept header)`,
    );
  }
}

/**
 * Whether the client asked for YAML first: the first media range kars can answer is application/yaml
 * (kube-apiserver encodes its answer in the first type of the Accept list it supports).
 */
export function prefersYaml(accept: string | string[] | undefined): boolean {
  const header = Array.isArray(accept) ? accept.join(',') : accept;
  if (header === undefined) return false;
  for (const r of header.split(',')) {
    const range = (r.split(';')[0] ?? '').trim().toLowerCase();
    if (range === 'application/yaml') return true;
    if (range === 'application/json' || range === 'application/*' || range === '*/*' || range.endsWith('+json')) return false;
  }
  return false;
}
