/**
 * What structured-merge-diff knows about a built-in kind's shape and kars's field tracking needs:
 * which structs sit in the kind's zero value (value struct fields reached from the root), which
 * values are atomic, and the keys of its associative lists. kube-apiserver tracks managedFields of
 * built-in kinds against their Go types; without this an Update of a Deployment would own `spec`
 * itself (`"."`), and a RoleBinding's `roleRef` field by field, where kube owns `roleRef` whole.
 *
 * The structs come from the generated protobuf definitions (`(kars.ptr)` marks a pointer field);
 * atomic types and list keys are the `+structType=atomic`, `+mapType=atomic` and
 * `+listType=map`/`+listMapKey` markers of k8s.io/api for the kinds kars serves.
 */
import type { FieldOptions } from '@kars/kube-patch';
import protobuf from 'protobufjs';
import { isScalarMessage, protobufType } from '../protobuf/codec.js';
import { EVENT_ZERO_FIELDS } from './decoding.js';

/** Messages marked `+structType=atomic` upstream. */
const ATOMIC_MESSAGES = new Set([
  'k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector',
  'k8s.io.apimachinery.pkg.apis.meta.v1.OwnerReference',
  'k8s.io.api.core.v1.ObjectReference',
  'k8s.io.api.core.v1.LocalObjectReference',
  'k8s.io.api.core.v1.TypedLocalObjectReference',
  'k8s.io.api.core.v1.NodeSelector',
  'k8s.io.api.rbac.v1.RoleRef',
]);

/** `+mapType=atomic` maps, by kind and dotted path. */
const ATOMIC_MAPS: Record<string, string[]> = {
  '/v1/Service': ['spec.selector'],
  'apps/v1/Deployment': ['spec.template.spec.nodeSelector'],
};

function podSpecKeys(p: string): Record<string, string[]> {
  const c = (q: string): Record<string, string[]> => ({
    [q]: ['name'],
    [`${q}[].ports`]: ['containerPort', 'protocol'],
    [`${q}[].env`]: ['name'],
    [`${q}[].volumeMounts`]: ['mountPath'],
    [`${q}[].volumeDevices`]: ['devicePath'],
    [`${q}[].resizePolicy`]: ['resourceName'],
  });
  return {
    ...c(`${p}.containers`),
    ...c(`${p}.initContainers`),
    ...c(`${p}.ephemeralContainers`),
    [`${p}.volumes`]: ['name'],
    [`${p}.imagePullSecrets`]: ['name'],
    [`${p}.hostAliases`]: ['ip'],
    [`${p}.topologySpreadConstraints`]: ['topologyKey', 'whenUnsatisfiable'],
    [`${p}.resourceClaims`]: ['name'],
    [`${p}.schedulingGates`]: ['name'],
  };
}

/** Lists a zero-value struct declares without omitempty (Go's zero value holds them, as null), by kind. */
const ZERO_LISTS: Record<string, string[]> = {
  'apps/v1/Deployment': ['spec.template.spec.containers'],
  // (and scalars: an Event's fields without omitempty hold their zero value in the zero Event)
  '/v1/Event': Object.keys(EVENT_ZERO_FIELDS),
};

/** `+listType=map` lists and their `+listMapKey`s, by kind. */
const LIST_KEYS: Record<string, Record<string, string[]>> = {
  'apps/v1/Deployment': { ...podSpecKeys('spec.template.spec'), 'status.conditions': ['type'] },
  '/v1/Service': { 'spec.ports': ['port', 'protocol'], 'status.conditions': ['type'] },
  '/v1/ServiceAccount': { secrets: ['name'] },
  '/v1/Namespace': { 'status.conditions': ['type'] },
};

/** Key fields with a `+default` upstream (a port's protocol is TCP), by kind and list. */
const LIST_KEY_DEFAULTS: Record<string, Record<string, Record<string, unknown>>> = {
  'apps/v1/Deployment': Object.fromEntries(
    ['containers', 'initContainers', 'ephemeralContainers'].map((c) => [`spec.template.spec.${c}[].ports`, { protocol: 'TCP' }]),
  ),
  '/v1/Service': { 'spec.ports': { protocol: 'TCP' } },
};

const MAX_DEPTH = 16;

interface Shape {
  zeroPresent: Set<string>;
  atomic: Set<string>;
}

function walk(type: protobuf.Type, dotted: string, inZero: boolean, shape: Shape, depth: number): void {
  if (depth > MAX_DEPTH) return;
  for (const field of type.fieldsArray) {
    const opts = field.options ?? {};
    const t = field.resolvedType;
    if (opts['(kars.inline)'] === true) {
      if (t instanceof protobuf.Type) walk(t, dotted, inZero, shape, depth + 1);
      continue;
    }
    const name = typeof opts['(kars.json)'] === 'string' ? (opts['(kars.json)'] as string) : field.name;
    const child = dotted === '' ? name : `${dotted}.${name}`;
    if (!(t instanceof protobuf.Type) || field.map || isScalarMessage(t.fullName)) continue;
    const full = t.fullName.replace(/^\./, '');
    const at = field.repeated ? `${child}[]` : child;
    if (ATOMIC_MESSAGES.has(full)) {
      shape.atomic.add(at);
      continue;
    }
    const zero = inZero && !field.repeated && opts['(kars.ptr)'] !== true;
    if (zero) shape.zeroPresent.add(child);
    walk(t, at, zero, shape, depth + 1);
  }
}

const cache = new Map<string, FieldOptions | undefined>();

/** The typed field options of a built-in group/version/kind; undefined when kars has no definition. */
export function typedFieldOptions(group: string, version: string, kind: string): FieldOptions | undefined {
  const key = `${group}/${version}/${kind}`;
  if (cache.has(key)) return cache.get(key);
  const type = protobufType(group, version, kind);
  let out: FieldOptions | undefined;
  if (type) {
    const shape: Shape = { zeroPresent: new Set(), atomic: new Set() };
    walk(type, '', true, shape, 0);
    for (const p of ATOMIC_MAPS[key] ?? []) shape.atomic.add(p);
    for (const p of ZERO_LISTS[key] ?? []) shape.zeroPresent.add(p);
    out = { zeroPresent: shape.zeroPresent, atomic: shape.atomic, listKeys: LIST_KEYS[key] ?? {} };
    if (LIST_KEY_DEFAULTS[key]) out.listKeyDefaults = LIST_KEY_DEFAULTS[key];
  }
  cache.set(key, out);
  return out;
}
