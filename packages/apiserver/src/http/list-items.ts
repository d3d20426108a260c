/**
 * Items of a list answer as kube-apiserver encodes them. A built-in kind's list is a typed Go list
 * (ConfigMapList): its items carry no `apiVersion` or `kind` (TypeMeta is set only on the top-level
 * object). A custom resource's list is unstructured and its items keep both.
 */
import type { KubeObject } from '@kars/kube-core';
import type { ResourceInfo } from '../registry/resource.js';

/** One stored item's JSON text as a list item of `ri` served at `apiVersion`. */
export function listItemText(ri: ResourceInfo, apiVersion: string, body: string): string {
  if (!ri.builtin) return body;
  // Stored bodies begin with apiVersion then kind (the write path sets them in that order): cut them off
  // without a parse; anything else takes the slow road.
  const head = `{"apiVersion":${JSON.stringify(apiVersion)},"kind":${JSON.stringify(ri.kind)},`;
  if (body.startsWith(head)) return `{${body.slice(head.length)}`;
  const obj = JSON.parse(body) as Record<string, unknown>;
  delete obj['apiVersion'];
  delete obj['kind'];
  return JSON.stringify(obj);
}

/** An object as a list item of `ri` (a copy without TypeMeta for built-in kinds). */
export function listItemObject(ri: ResourceInfo, obj: KubeObject): KubeObject {
  if (!ri.builtin) return obj;
  const { apiVersion: _a, kind: _k, ...rest } = obj;
  return rest as KubeObject;
}
