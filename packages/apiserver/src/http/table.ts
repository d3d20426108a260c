import type { KubeObject } from '@kars/kube-core';
import { isObject } from '@kars/kube-core';
import type { PrinterColumn, ResourceInfo } from '../registry/resource.js';

/** Evaluate the subset of JSONPath that printer columns use: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`. */
export function evalJsonPath(obj: unknown, path: string): unknown {
  const tokens =
    path
      .replace(/^\{?\s*/, '')
      .replace(/\s*\}?$/, '')
      .match(/\.[^.[]+|\[[^\]]*\]/g) ?? [];
  let cur: unknown = obj;
  for (const tok of tokens) {
    if (cur === undefined || cur === null) return undefined;
    if (tok.startsWith('.')) {
      cur = isObject(cur) ? cur[tok.slice(1)] : undefined;
      continue;
    }
    const inner = tok.slice(1, -1);
    const filter = inner.match(/^\?\(@\.([\w.-]+)\s*==\s*["']?([^"']*)["']?\)$/);
    if (filter && Array.isArray(cur)) {
      const [, key = '', want] = filter;
      cur = cur.find((e) => isObject(e) && String(evalJsonPath(e, `.${key}`)) === want);
    } else if (/^\d+$/.test(inner) && Array.isArray(cur)) cur = cur[Number(inner)];
    else if (inner === '*' && Array.isArray(cur)) continue;
    else return undefined;
  }
  return cur;
}

/** Human duration as kubectl prints ages: 45s, 5m, 3h, 2d. */
export function humanAge(from: string, now = Date.now()): string {
  const t = Date.parse(from);
  if (Number.isNaN(t)) return '<invalid>';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 ? `${s % 60}s` : ''}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/**
 * A built-in kind's cell, as kube's printers compute it: Data counts the keys, a creation
 * timestamp is an age whatever the column's declared type, and an absent text value is <none>.
 */
function builtinCell(obj: KubeObject, col: PrinterColumn): unknown {
  if (col.name === 'Data')
    return (
      (isObject(obj['data']) ? Object.keys(obj['data']).length : 0) +
      (isObject(obj['binaryData']) ? Object.keys(obj['binaryData']).length : 0)
    );
  const v = evalJsonPath(obj, col.jsonPath);
  if (v === undefined || v === null) return col.type === 'integer' || col.type === 'number' ? null : '<none>';
  if ((col.type === 'date' || col.jsonPath === '.metadata.creationTimestamp') && typeof v === 'string') return humanAge(v);
  if (typeof v === 'object') return JSON.stringify(v);
  return v;
}

/**
 * A custom resource's cell, as apiextensions-apiserver's table convertor computes it: null when
 * the path finds nothing or the value does not fit the column's type; a `string` column prints
 * any value (objects and arrays as JSON); an `integer` column truncates; a `date` column is an age.
 */
function customCell(obj: KubeObject, col: PrinterColumn): unknown {
  const v = evalJsonPath(obj, col.jsonPath);
  if (v === undefined || v === null) return null;
  switch (col.type) {
    case 'string':
      return typeof v === 'object' ? JSON.stringify(v) : String(v);
    case 'integer':
      return typeof v === 'number' ? Math.trunc(v) : null;
    case 'number':
      return typeof v === 'number' ? v : null;
    case 'boolean':
      return typeof v === 'boolean' ? v : null;
    case 'date':
      return typeof v === 'string' ? humanAge(v) : null;
    default:
      return null;
  }
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

/** ObjectMeta.name's OpenAPI description, which kube gives the Name column. */
const NAME_DESCRIPTION =
  'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names';

/** A meta.k8s.io/v1 Table of the given objects, as `kubectl get` asks for it. */
export function toTable(
  ri: ResourceInfo,
  version: string,
  objects: KubeObject[],
  listMeta: Record<string, unknown>,
  include: IncludeObject,
): Record<string, unknown> {
  const v = ri.versions.find((x) => x.name === version);
  const declared = v?.printerColumns ?? [];
  const columns: PrinterColumn[] =
    declared.length > 0 ? declared : [{ name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }];
  const columnDefinitions = [
    { name: 'Name', type: 'string', format: 'name', description: NAME_DESCRIPTION, priority: 0 },
    ...columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c.format ?? '',
      // kube's CRD table convertor describes a column without a description by its JSONPath.
      description: c.description ?? (ri.builtin ? '' : `Custom resource definition column (in JSONPath format): ${c.jsonPath}`),
      priority: c.priority ?? 0,
    })),
  ];
  const rows = objects.map((o) => {
    const row: Record<string, unknown> = {
      cells: [o.metadata.name ?? '', ...columns.map((c) => (ri.builtin ? builtinCell(o, c) : customCell(o, c)))],
    };
    // kube drops the object of a row for includeObject=None, which serialises as null.
    if (include === 'None') row['object'] = null;
    else if (include === 'Object') row['object'] = o;
    else if (include === 'Metadata') row['object'] = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
    return row;
  });
  return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: listMeta, columnDefinitions, rows };
}

/** True when the Accept header asks for a Table. */
export function wantsTable(accept: string | undefined): boolean {
  return accept !== undefined && /as=Table/.test(accept);
}
