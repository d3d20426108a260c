import { badRequest, ApiError, readBody as readBounded } from '@kars/kube-core';
import { checkJsonDepth } from './limits.js';
import { decodeYaml } from './yaml.js';
import type { Readable } from 'node:stream';

/** Largest request body accepted, as kube-apiserver (3 MiB). */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** Read a request body, refusing anything over {@link MAX_BODY_BYTES} with 413. */
export async function readBody(req: Readable, declaredLength: number | undefined): Promise<Buffer> {
  const r = await readBounded(req, MAX_BODY_BYTES, declaredLength);
  if (r.ok) return r.body;
  if (r.reason === 'too_large') throw tooLarge();
  throw new Error('the client closed the connection before the request body ended');
}

function tooLarge(): ApiError {
  return new ApiError(413, 'RequestEntityTooLarge', `the request body is too large: limit is ${MAX_BODY_BYTES} bytes`);
}

/**
 * Decode a body as JSON, or as YAML when the content type says so (apply patches are YAML), within
 * the nesting and alias limits of `limits.ts`, checked before the object is built. YAML is decoded
 * on a worker thread (`yaml.ts`), so no YAML body can stall the event loop.
 */
export async function decodeBody(raw: Buffer, contentType: string | undefined): Promise<unknown> {
  const text = raw.toString('utf8');
  if (!/\S/.test(text)) throw badRequest('the request body is empty');
  const ct = (contentType ?? '').toLowerCase();
  if (ct.includes('yaml')) {
    try {
      return await decodeYaml(text);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      throw badRequest(`error decoding YAML: ${err instanceof Error ? err.message : String(err)}`, err);
    }
  }
  if (ct.includes('protobuf'))
    throw new ApiError(
      415,
      'UnsupportedMediaType',
      'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml',
    );
  checkJsonDepth(text);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw badRequest(`error decoding JSON: ${err instanceof Error ? err.message : String(err)}`, err);
  }
}
