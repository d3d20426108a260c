import { compileSchema, SchemaError } from '@kars/kube-schema';
import type { SchemaCause } from '@kars/kube-schema';
import { isObject } from '@kars/kube-core';
import type { KubeObject, StatusCause } from '@kars/kube-core';
import { invalidValue, requiredCause } from '../field-errors.js';
import type { PrinterColumn, ResourceInfo, VersionInfo } from './resource.js';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

/** Dotted paths of associative lists (x-kubernetes-list-type: map) and their keys. */
function collectListKeys(schema: unknown, path: string, out: Record<string, string[]>): void {
  if (!isObject(schema)) return;
  if (schema['x-kubernetes-list-type'] === 'map') out[path] = strings(schema['x-kubernetes-list-map-keys']);
  const props = schema['properties'];
  if (isObject(props)) for (const [k, v] of Object.entries(props)) collectListKeys(v, path === '' ? k : `${path}.${k}`, out);
  if (isObject(schema['items'])) collectListKeys(schema['items'], path, out);
}

/**
 * Validate a CustomResourceDefinition and turn it into a ResourceInfo.
 * Returns field causes (422) instead of throwing when the CRD is invalid.
 */
export function resourceFromCrd(crd: KubeObject): { info?: ResourceInfo; causes: StatusCause[] } {
  const causes: StatusCause[] = [];
  const spec = isObject(crd['spec']) ? crd['spec'] : {};
  const names = isObject(spec['names']) ? spec['names'] : {};
  const group = str(spec['group']) ?? '';
  const plural = str(names['plural']) ?? '';
  const kind = str(names['kind']) ?? '';
  const scope = str(spec['scope']);
  // kube checks the name (ValidateObjectMeta) before the spec.
  const crdName = crd.metadata.name ?? '';
  if (crdName !== `${plural}.${group}`) causes.push(invalidValue('metadata.name', crdName, 'must be spec.names.plural+"."+spec.group'));
  if (group === '') causes.push(requiredCause('spec.group'));
  else if (!group.includes('.')) causes.push(invalidValue('spec.group', group, 'should be a domain with at least one dot'));
  if (!DNS_LABEL.test(plural))
    causes.push({ reason: 'FieldValueInvalid', field: 'spec.names.plural', message: 'must be a lowercase DNS label' });
  if (kind === '') causes.push(requiredCause('spec.names.kind'));
  if (scope !== 'Namespaced' && scope !== 'Cluster')
    causes.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.scope',
      message: 'Unsupported value: supported values: "Cluster", "Namespaced"',
    });
  const rawVersions = Array.isArray(spec['versions']) ? spec['versions'] : [];
  const versions: VersionInfo[] = [];
  let hasStatus = false;
  rawVersions.forEach((rv: unknown, i: number) => {
    const v = isObject(rv) ? rv : {};
    const name = str(v['name']) ?? '';
    if (!DNS_LABEL.test(name))
      causes.push({ reason: 'FieldValueInvalid', field: `spec.versions[${i}].name`, message: 'must be a DNS label' });
    const subres = isObject(v['subresources']) ? v['subresources'] : {};
    if (isObject(subres['status'])) hasStatus = true;
    const schemaHolder = isObject(v['schema']) ? v['schema'] : {};
    const columns: PrinterColumn[] = (Array.isArray(v['additionalPrinterColumns']) ? v['additionalPrinterColumns'] : [])
      .filter(isObject)
      .map((c) => {
        const col: PrinterColumn = { name: str(c['name']) ?? '', type: str(c['type']) ?? 'string', jsonPath: str(c['jsonPath']) ?? '' };
        const format = str(c['format']);
        const description = str(c['description']);
        if (format !== undefined) col.format = format;
        if (description !== undefined) col.description = description;
        if (typeof c['priority'] === 'number') col.priority = c['priority'];
        return col;
      });
    const vi: VersionInfo = { name, served: v['served'] !== false, storage: v['storage'] === true, printerColumns: columns };
    const selectable = (Array.isArray(v['selectableFields']) ? v['selectableFields'] : [])
      .map((f) => (isObject(f) ? str(f['jsonPath']) : undefined))
      .filter((p): p is string => p !== undefined)
      .map((p) => p.replace(/^\./, ''));
    if (selectable.length > 0) vi.selectableFields = selectable;
    const openapi = schemaHolder['openAPIV3Schema'];
    if (openapi === undefined) {
      causes.push({ reason: 'FieldValueRequired', field: `spec.versions[${i}].schema.openAPIV3Schema`, message: 'schemas are required' });
    } else {
      try {
        vi.schema = compileSchema(openapi);
        vi.openAPIV3Schema = openapi;
        const listKeys: Record<string, string[]> = {};
        collectListKeys(openapi, '', listKeys);
        vi.listKeys = listKeys;
      } catch (err) {
        if (err instanceof SchemaError) {
          for (const c of err.causes as SchemaCause[])
            causes.push({
              reason: c.reason,
              field: `spec.versions[${i}].schema.openAPIV3Schema${c.field ? '.' + c.field : ''}`,
              message: c.message,
            });
        } else {
          causes.push({
            reason: 'FieldValueInvalid',
            field: `spec.versions[${i}].schema.openAPIV3Schema`,
            message: err instanceof Error ? err.message : String(err),
          });
        }
      }
    }
    versions.push(vi);
  });
  const storageCount = versions.filter((v) => v.storage).length;
  if (storageCount !== 1) {
    // kube prints the internal versions (Go structs without JSON tags); kars prints only an empty list's or a missing one's.
    const value = rawVersions.length > 0 ? '' : Array.isArray(spec['versions']) ? 'Invalid value: []: ' : 'Invalid value: null: ';
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.versions',
      message: `${value}must have exactly one version marked as storage version`,
    });
  }
  if (causes.length > 0) return { causes };
  return {
    causes,
    info: {
      group,
      resource: plural,
      singular: str(names['singular']) ?? kind.toLowerCase(),
      kind,
      listKind: str(names['listKind']) ?? `${kind}List`,
      namespaced: scope === 'Namespaced',
      shortNames: strings(names['shortNames']),
      categories: strings(names['categories']),
      versions,
      hasStatus,
      tracksGeneration: true,
      allowUnconditionalUpdate: false,
      // kube's custom resource store answers a DELETE that removes the object with a Status.
      deleteReturnsObject: false,
      builtin: false,
    },
  };
}

/**
 * ValidateCustomResourceDefinitionStoredVersions' first rule: a CRD keeps at least one stored version. Its status
 * then is the stored one's (nothing on a create) plus the first version marked as storage, as kube's strategy adds it.
 */
export function crdStoredVersionsCauses(crd: KubeObject, old: KubeObject | undefined): StatusCause[] {
  const spec = isObject(crd['spec']) ? crd['spec'] : {};
  const versions = Array.isArray(spec['versions']) ? spec['versions'].filter(isObject) : [];
  if (versions.some((v) => v['storage'] === true)) return [];
  const was = old && isObject(old['status']) ? old['status']['storedVersions'] : undefined;
  if (strings(was).length > 0) return [];
  // Go prints a nil slice (a created CRD's) as null.
  const value = Array.isArray(was) ? '[]' : 'null';
  return [
    {
      reason: 'FieldValueInvalid',
      field: 'status.storedVersions',
      message: `Invalid value: ${value}: must have at least one stored version`,
    },
  ];
}
