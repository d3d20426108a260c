/**
 * Step builders for every scenario module of the differential suite: each builds its keys in the
 * order the recorded fixture has them, so scenarios built with them stay byte-identical.
 */
import type { RequestStep } from './types.js';

export type Content = Record<string, unknown>;

/** An object: its envelope, then its other fields (`rest`). */
export const manifest = (apiVersion: string, kind: string, metadata: Content, rest: Content = {}): Content => ({
  apiVersion,
  kind,
  metadata,
  ...rest,
});
/** A POST of `body`; `extra` goes last (setup, save, …), as in the builders below. */
export const post = (path: string, body: unknown, extra: Partial<RequestStep> = {}): RequestStep => ({
  method: 'POST',
  path,
  body,
  ...extra,
});
/** A PATCH of `body` as `contentType`. */
export const patch = (path: string, body: unknown, contentType: string, extra: Partial<RequestStep> = {}): RequestStep => ({
  method: 'PATCH',
  path,
  body,
  contentType,
  ...extra,
});
export const put = (path: string, body: unknown): RequestStep => ({ method: 'PUT', path, body });
export const del = (path: string, extra: Partial<RequestStep> = {}): RequestStep => ({ method: 'DELETE', path, ...extra });

export const MERGE = 'application/merge-patch+json';
export const JSON_PATCH = 'application/json-patch+json';
export const APPLY = 'application/apply-patch+yaml';
