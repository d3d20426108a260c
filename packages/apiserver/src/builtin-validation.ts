/**
 * The parts of kube-apiserver's per-kind validation that kars apiserver runs for built-in kinds,
 * and the uid check of an update that every kind shares (the rest of metadata is `meta.ts`'s). Found missing by the differential
 * suite (issue 19, ADR 0052); the messages are k8s.io/kubernetes v1.34's
 * (pkg/apis/core/validation, pkg/apis/rbac/validation; pkg/apis/apps/validation in `apps-validation.ts`).
 * A Service's cluster IP and node port rules are checked where they are allocated (service-addresses.ts).
 *
 * Pure functions over the object as it will be stored (and the stored one, on an update); each
 * returns the causes in kube's order, to be joined with the rest of admission's.
 */
import { goQuote, isObject } from '@kars/kube-core';
import type { KubeObject, StatusCause } from '@kars/kube-core';
import { deploymentCauses } from './apps-validation.js';
import { goValue, invalidValue, notSupportedCause as notSupported, requiredCause as required } from './field-errors.js';
import { dns1123LabelProblems } from './meta.js';
import type { ResourceInfo } from './registry/resource.js';

/** kube's MaxSecretSize: a ConfigMap's data and binaryData together, in bytes. */
const MAX_CONFIG_MAP_BYTES = 1024 * 1024;
const CONFIG_MAP_KEY = /^[-._a-zA-Z0-9]+$/;
const CONFIG_MAP_KEY_MSG =
  "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/** apimachinery's IsConfigMapKey. */
function configMapKeyProblems(key: string): string[] {
  const out: string[] = [];
  if (key.length > 253) out.push('must be no more than 253 characters');
  if (!CONFIG_MAP_KEY.test(key)) out.push(CONFIG_MAP_KEY_MSG);
  if (key === '.') out.push("must not be '.'");
  else if (key === '..') out.push("must not be '..'");
  else if (key.startsWith('..')) out.push("must not start with '..'");
  return out;
}

const record = (v: unknown): Record<string, unknown> => (isObject(v) ? v : {});

/** ValidateConfigMap: keys, keys in both bags, and the total size. */
function configMapCauses(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const data = record(obj['data']);
  const binary = record(obj['binaryData']);
  let total = 0;
  for (const [k, v] of Object.entries(data)) {
    for (const p of configMapKeyProblems(k)) causes.push(invalidValue(`data[${k}]`, k, p));
    // Own keys only: a key named `constructor` or `__proto__` is a key like any other.
    if (Object.hasOwn(binary, k)) causes.push(invalidValue(`data[${k}]`, k, 'duplicate of key present in binaryData'));
    total += typeof v === 'string' ? Buffer.byteLength(v) : 0;
  }
  for (const [k, v] of Object.entries(binary)) {
    for (const p of configMapKeyProblems(k)) causes.push(invalidValue(`binaryData[${k}]`, k, p));
    total += typeof v === 'string' ? Buffer.from(v, 'base64').length : 0;
  }
  // kube's path for "the whole object" is the empty one, printed `[]`.
  if (total > MAX_CONFIG_MAP_BYTES)
    causes.push({ reason: 'FieldValueTooLong', field: '[]', message: `Too long: may not be more than ${MAX_CONFIG_MAP_BYTES} bytes` });
  return causes;
}

/** ValidateConfigMapUpdate: an immutable ConfigMap keeps its data, its binaryData and its immutability. */
function configMapUpdateCauses(obj: KubeObject, old: KubeObject): StatusCause[] {
  if (old['immutable'] !== true) return [];
  const causes: StatusCause[] = [];
  const forbidden = (field: string): StatusCause => ({
    reason: 'FieldValueForbidden',
    field,
    message: 'Forbidden: field is immutable when `immutable` is set',
  });
  if (obj['immutable'] !== true) causes.push(forbidden('immutable'));
  if (!sameMap(obj['data'], old['data'])) causes.push(forbidden('data'));
  if (!sameMap(obj['binaryData'], old['binaryData'])) causes.push(forbidden('binaryData'));
  return causes;
}

/** Go's reflect.DeepEqual of two decoded maps, where an empty map and none are not the same. */
function sameMap(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  const ka = Object.keys(record(a)).sort();
  const kb = Object.keys(record(b)).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && record(a)[k] === record(b)[k]);
}

/** ValidateRoleBindingUpdate (and the ClusterRoleBinding one): roleRef never changes. The value prints as the Go struct's JSON. */
function roleRefUpdateCauses(obj: KubeObject, old: KubeObject): StatusCause[] {
  const ref = record(obj['roleRef']);
  const was = record(old['roleRef']);
  const go = (r: Record<string, unknown>): Record<string, unknown> => ({
    APIGroup: r['apiGroup'] ?? '',
    Kind: r['kind'] ?? '',
    Name: r['name'] ?? '',
  });
  if (JSON.stringify(go(ref)) === JSON.stringify(go(was))) return [];
  return [{ reason: 'FieldValueInvalid', field: 'roleRef', message: `Invalid value: ${JSON.stringify(go(ref))}: cannot change roleRef` }];
}

const PORT_RANGE_MSG = 'must be between 1 and 65535, inclusive';
const validPort = (n: unknown): boolean => typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535;

/** apimachinery's IsValidPortName (an IANA_SVC_NAME). */
function portNameProblems(name: string): string[] {
  const out: string[] = [];
  if (name.length > 15) out.push('must be no more than 15 characters');
  if (!/^[-a-z0-9]+$/.test(name)) out.push('must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  if (!/[a-z]/.test(name)) out.push('must contain at least one letter (a-z)');
  if (name.startsWith('-') || name.endsWith('-')) out.push('must not begin or end with a hyphen');
  if (name.includes('--')) out.push('must not contain consecutive hyphens');
  return out;
}

const SERVICE_TYPES = ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort'];
const SESSION_AFFINITIES = ['ClientIP', 'None'];
const PORT_PROTOCOLS = ['SCTP', 'TCP', 'UDP'];
const TRAFFIC_POLICIES = ['Cluster', 'Local'];

/** validateService's checks of what a client writes (type, ports, session affinity, traffic policy), after defaulting. */
function serviceCauses(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const spec = record(obj['spec']);
  const type = spec['type'];
  const headless = spec['clusterIP'] === 'None';
  const ports = Array.isArray(spec['ports']) ? spec['ports'] : [];
  if (ports.length === 0 && !headless && type !== 'ExternalName') causes.push(required('spec.ports'));
  if (type === 'ExternalName' && String(spec['externalName'] ?? '').replace(/\.$/, '') === '') causes.push(required('spec.externalName'));
  const names = new Set<string>();
  ports.forEach((raw, i) => {
    const p = record(raw);
    const at = `spec.ports[${i}]`;
    const name = typeof p['name'] === 'string' ? p['name'] : '';
    if (ports.length > 1 && name === '') causes.push(required(`${at}.name`));
    else if (name !== '') {
      for (const why of dns1123LabelProblems(name)) causes.push(invalidValue(`${at}.name`, name, why));
      if (names.has(name))
        causes.push({ reason: 'FieldValueDuplicate', field: `${at}.name`, message: `Duplicate value: ${goQuote(name)}` });
      names.add(name);
    }
    if (!validPort(p['port']))
      causes.push({
        reason: 'FieldValueInvalid',
        field: `${at}.port`,
        message: `Invalid value: ${goValue(p['port'] ?? 0)}: ${PORT_RANGE_MSG}`,
      });
    if (p['protocol'] === undefined || p['protocol'] === '') causes.push(required(`${at}.protocol`));
    else if (!PORT_PROTOCOLS.includes(String(p['protocol']))) causes.push(notSupported(`${at}.protocol`, p['protocol'], PORT_PROTOCOLS));
    const target = p['targetPort'];
    if (typeof target === 'string') for (const why of portNameProblems(target)) causes.push(invalidValue(`${at}.targetPort`, target, why));
    else if (!validPort(target))
      causes.push({
        reason: 'FieldValueInvalid',
        field: `${at}.targetPort`,
        message: `Invalid value: ${goValue(target ?? 0)}: ${PORT_RANGE_MSG}`,
      });
  });
  const affinity = spec['sessionAffinity'];
  if (affinity === undefined || affinity === '') causes.push(required('spec.sessionAffinity'));
  else if (!SESSION_AFFINITIES.includes(String(affinity))) causes.push(notSupported('spec.sessionAffinity', affinity, SESSION_AFFINITIES));
  if (type === undefined || type === '') causes.push(required('spec.type'));
  else if (!SERVICE_TYPES.includes(String(type))) causes.push(notSupported('spec.type', type, SERVICE_TYPES));
  if (type === 'ClusterIP')
    ports.forEach((raw, i) => {
      const np = record(raw)['nodePort'];
      if (np !== undefined && np !== 0)
        causes.push({
          reason: 'FieldValueForbidden',
          field: `spec.ports[${i}].nodePort`,
          message: "Forbidden: may not be used when `type` is 'ClusterIP'",
        });
    });
  const itp = spec['internalTrafficPolicy'];
  if (itp !== undefined && itp !== null && !TRAFFIC_POLICIES.includes(String(itp)))
    causes.push(notSupported('spec.internalTrafficPolicy', itp, TRAFFIC_POLICIES));
  return causes;
}

/**
 * ValidateObjectMetaUpdate's finalizer and uid rules: no finalizer may be added to an object marked
 * for deletion, and the uid is immutable. kube-apiserver runs them twice on every update (once as the
 * common check of every resource, once in the kind's own validation), so each cause is listed twice.
 */
export function metadataUpdateCauses(obj: KubeObject, old: KubeObject): StatusCause[] {
  const once: StatusCause[] = [];
  if (old.metadata.deletionTimestamp) {
    const had = new Set(old.metadata.finalizers ?? []);
    const added = [...new Set((obj.metadata.finalizers ?? []).filter((f) => !had.has(f)))].sort();
    if (added.length > 0)
      once.push({
        reason: 'FieldValueForbidden',
        field: 'metadata.finalizers',
        message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map(goQuote).join(', ')}}`,
      });
  }
  const uid = obj.metadata.uid ?? '';
  if (uid !== '' && uid !== (old.metadata.uid ?? '')) once.push(invalidValue('metadata.uid', uid, 'field is immutable'));
  return [...once, ...once.map((c) => ({ ...c }))];
}

/** The per-kind validation of built-in `ri` for `obj` (and, on an update, the stored `old`). */
export function builtinKindCauses(ri: ResourceInfo, obj: KubeObject, old: KubeObject | undefined): StatusCause[] {
  if (!ri.builtin) return [];
  const gr = `${ri.group}/${ri.resource}`;
  if (gr === '/configmaps') return [...(old ? configMapUpdateCauses(obj, old) : []), ...configMapCauses(obj)];
  if (gr === '/services') return serviceCauses(obj);
  if (old && (gr === 'rbac.authorization.k8s.io/rolebindings' || gr === 'rbac.authorization.k8s.io/clusterrolebindings'))
    return roleRefUpdateCauses(obj, old);
  if (gr === 'apps/deployments') return deploymentCauses(obj, old);
  return [];
}
