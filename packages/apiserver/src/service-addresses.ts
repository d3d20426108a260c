/**
 * What kube-apiserver's Service storage allocates (pkg/registry/core/service/storage): a cluster IP
 * from the service CIDR, the IP family fields of a single-stack IPv4 cluster, and node ports for
 * NodePort and LoadBalancer Services; on an update, the allocated values a request leaves out are
 * kept (patchAllocatedValues) and a set cluster IP may not change. kube does this after the field
 * manager has run, so these fields belong to no manager; kars does it in the same place of its
 * write path (service.ts), with the addresses already in use read from storage (ADR 0053).
 *
 * kars runs no Service networking: nothing routes these addresses. They exist so that a Service
 * reads as it does on kube-apiserver (kubectl, Helm and manifests that read `spec.clusterIP`).
 */
import { invalid, isObject } from '@kars/kube-core';
import type { KubeObject, StatusCause } from '@kars/kube-core';
import { forbiddenCause } from './field-errors.js';
import { grKey } from './registry/resource.js';

/** Storage key of Services. */
export const SERVICES_GR = grKey('', 'services');

/** kube-apiserver's default `--service-cluster-ip-range`, the one kars serves. */
export const SERVICE_CIDR = '10.0.0.0/24';
const CIDR_BASE = (10 << 24) >>> 0;
const CIDR_SIZE = 256;
/** The first address of the range: the `kubernetes` Service's on kube-apiserver, never handed out. */
const RESERVED_FIRST = 1;

/** kube-apiserver's default `--service-node-port-range`. */
const NODE_PORT_MIN = 30000;
const NODE_PORT_MAX = 32767;

/** The cluster IPs and node ports other Services hold. */
export interface AddressesInUse {
  ips: Set<string>;
  nodePorts: Set<number>;
}

const specOf = (o: KubeObject | undefined): Record<string, unknown> | undefined => (o && isObject(o['spec']) ? o['spec'] : undefined);
const portsOf = (spec: Record<string, unknown> | undefined): Record<string, unknown>[] =>
  spec && Array.isArray(spec['ports']) ? spec['ports'].filter(isObject) : [];
const ipsOf = (spec: Record<string, unknown> | undefined): string[] =>
  spec && Array.isArray(spec['clusterIPs']) ? spec['clusterIPs'].filter((x): x is string => typeof x === 'string') : [];

/** What the given stored Services hold (the Service being written left out by the caller). */
export function addressesInUse(services: Iterable<KubeObject>): AddressesInUse {
  const out: AddressesInUse = { ips: new Set(), nodePorts: new Set() };
  for (const svc of services) {
    const spec = specOf(svc);
    // Only the types that are allocated addresses hold them.
    if (needsClusterIP(spec)) for (const ip of ipsOf(spec)) if (ip !== 'None') out.ips.add(ip);
    if (needsNodePort(spec))
      for (const p of portsOf(spec)) if (typeof p['nodePort'] === 'number' && p['nodePort'] !== 0) out.nodePorts.add(p['nodePort']);
  }
  return out;
}

/** kube's needsClusterIP: every type but ExternalName. */
const needsClusterIP = (spec: Record<string, unknown> | undefined): boolean => spec !== undefined && spec['type'] !== 'ExternalName';
/** kube's needsNodePort: NodePort, and LoadBalancer unless its node ports are turned off. */
const needsNodePort = (spec: Record<string, unknown> | undefined): boolean =>
  spec !== undefined &&
  (spec['type'] === 'NodePort' || (spec['type'] === 'LoadBalancer' && spec['allocateLoadBalancerNodePorts'] !== false));

/** The offset of `ip` in the service CIDR, or undefined when it is no IPv4 address of that range. */
function offsetInRange(ip: string): number | undefined {
  const parts = ip.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return undefined;
  const n = parts.reduce((acc, p) => ((acc << 8) | Number(p)) >>> 0, 0);
  const off = n - CIDR_BASE;
  // The network and broadcast addresses are not in kube's allocatable range.
  return off > 0 && off < CIDR_SIZE - 1 ? off : undefined;
}

const ipAt = (off: number): string => [(CIDR_BASE >>> 24) & 255, (CIDR_BASE >>> 16) & 255, (CIDR_BASE >>> 8) & 255, off].join('.');

/** A random free element of [lo, hi], or undefined when all are taken. */
function randomFree<T>(lo: number, hi: number, at: (i: number) => T, taken: (v: T) => boolean): T | undefined {
  const size = hi - lo + 1;
  const start = Math.floor(Math.random() * size);
  for (let i = 0; i < size; i++) {
    const v = at(lo + ((start + i) % size));
    if (!taken(v)) return v;
  }
  return undefined;
}

/**
 * Fill in what kube's Service storage allocates, in place, or throw kube's 422: carry allocated
 * values from `old` on an update, check that a set cluster IP stays, allocate a free cluster IP
 * (or check the one asked for), set the IP family fields, and allocate or check node ports.
 * `inUse` is asked only when something must be allocated or checked.
 */
export function allocateServiceAddresses(obj: KubeObject, old: KubeObject | undefined, inUse: () => AddressesInUse): void {
  const spec = specOf(obj);
  if (!spec) return;
  const was = specOf(old);
  const name = obj.metadata.name ?? '';
  const refuse = (causes: StatusCause[]): never => {
    throw invalid({ group: '', resource: 'services', kind: 'Service', name }, causes);
  };
  let used: AddressesInUse | undefined;
  const taken = (): AddressesInUse => (used ??= inUse());

  if (needsClusterIP(was) && needsClusterIP(spec)) carryAllocated(spec, was!);
  if (needsNodePort(was) && needsNodePort(spec)) carryNodePorts(spec, was!);
  if (was) dropTypeDependentFields(spec, was);
  // kube's NormalizeClusterIPs: clusterIP and clusterIPs[0] name the same address.
  const ip = typeof spec['clusterIP'] === 'string' ? spec['clusterIP'] : '';
  const ips = ipsOf(spec);
  if (ip !== '' && ips.length === 0) spec['clusterIPs'] = [ip];
  else if (ip === '' && ips.length > 0) spec['clusterIP'] = ips[0];

  if (needsClusterIP(spec)) clusterIPFields(spec, was, taken, refuse);
  else {
    // validateService: an ExternalName Service holds no cluster IP, family or policy.
    const forbidden = (field: string): StatusCause => forbiddenCause(field, 'may not be set for ExternalName services');
    const causes: StatusCause[] = [];
    if (Array.isArray(spec['clusterIPs']) && spec['clusterIPs'].length > 0) causes.push(forbidden('spec.clusterIPs'));
    if (Array.isArray(spec['ipFamilies']) && spec['ipFamilies'].length > 0) causes.push(forbidden('spec.ipFamilies'));
    if (spec['ipFamilyPolicy'] !== undefined && spec['ipFamilyPolicy'] !== null) causes.push(forbidden('spec.ipFamilyPolicy'));
    if (causes.length > 0) refuse(causes);
  }
  if (needsNodePort(spec)) allocateNodePorts(spec, was, taken, refuse);
}

/**
 * The cluster IP part of {@link allocateServiceAddresses}, for a Service of a type that has one:
 * kube's cluster-IP field checks, a set cluster IP stays, the IP family fields, and a free
 * address allocated (or the one asked for checked).
 */
function clusterIPFields(
  spec: Record<string, unknown>,
  was: Record<string, unknown> | undefined,
  taken: () => AddressesInUse,
  refuse: (causes: StatusCause[]) => never,
): void {
  const causes = clusterIPsCauses(spec);
  if (causes.length > 0) refuse(causes);
  if (was && needsClusterIP(was)) {
    const before = ipsOf(was);
    const now = ipsOf(spec);
    const headless = before[0] === 'None' && now[0] === 'None';
    if (!headless && before.length > 0 && now[0] !== before[0])
      refuse([
        {
          reason: 'FieldValueInvalid',
          field: 'spec.clusterIPs[0]',
          message: `Invalid value: ${JSON.stringify(now)}: may not change once set`,
        },
      ]);
  }
  if (spec['ipFamilyPolicy'] === undefined || spec['ipFamilyPolicy'] === null) {
    const selectorless = !isObject(spec['selector']) || Object.keys(spec['selector']).length === 0;
    // kube's special case: a headless Service without a selector may hold both families.
    spec['ipFamilyPolicy'] = was?.['ipFamilyPolicy'] ?? (spec['clusterIP'] === 'None' && selectorless ? 'RequireDualStack' : 'SingleStack');
  }
  if (!Array.isArray(spec['ipFamilies']) || spec['ipFamilies'].length === 0) spec['ipFamilies'] = ['IPv4'];
  const asked = typeof spec['clusterIP'] === 'string' ? spec['clusterIP'] : '';
  const keeps = was !== undefined && ipsOf(was)[0] === asked && asked !== '';
  if (asked === '') {
    const { ips: held } = taken();
    const free = randomFree(RESERVED_FIRST + 1, CIDR_SIZE - 2, ipAt, (a) => held.has(a));
    // kube answers an exhausted range with an internal error.
    if (free === undefined) throw new Error(`failed to allocate a serviceIP: range is full (${SERVICE_CIDR})`);
    spec['clusterIP'] = free;
    spec['clusterIPs'] = [free];
  } else if (asked !== 'None' && !keeps) {
    const offset = offsetInRange(asked);
    const why =
      offset === undefined
        ? `the provided IP (${asked}) is not in the valid range. The range of valid IPs is ${SERVICE_CIDR}`
        : offset === RESERVED_FIRST || taken().ips.has(asked)
          ? 'provided IP is already allocated'
          : undefined;
    if (why !== undefined)
      refuse([
        {
          reason: 'FieldValueInvalid',
          field: 'spec.clusterIPs',
          message: `Invalid value: ${JSON.stringify(ipsOf(spec))}: failed to allocate IP ${asked}: ${why}`,
        },
      ]);
  }
}

/**
 * ValidateServiceClusterIPsRelatedFields, as far as a single-stack IPv4 cluster needs it: clusterIP
 * and clusterIPs[0] agree, `None` stands alone, and no second cluster IP (none would be checked or
 * allocated, so one Service could claim another's address).
 */
function clusterIPsCauses(spec: Record<string, unknown>): StatusCause[] {
  const ip = typeof spec['clusterIP'] === 'string' ? spec['clusterIP'] : '';
  const ips = ipsOf(spec);
  const invalidIPs = (why: string, field = 'spec.clusterIPs'): StatusCause => ({
    reason: 'FieldValueInvalid',
    field,
    message: `Invalid value: ${JSON.stringify(ips)}: ${why}`,
  });
  if (ip !== '' && ips.length > 0 && ips[0] !== ip) return [invalidIPs('first value must match `clusterIP`')];
  if (ips.length < 2) return [];
  if (ips[0] === 'None') return [invalidIPs("'None' must be the first and only value")];
  if (ips.length > 2) return [invalidIPs('may only hold up to 2 values')];
  if (ips.every((a) => !a.includes(':'))) return [invalidIPs('may specify no more than one IP for each IP family')];
  // alloc.go: the family of a second address is not configured on this cluster.
  return [invalidIPs('IPv6 is not configured on this cluster', 'spec.clusterIPs[1]')];
}

/**
 * kube's dropTypeDependentFields: a Service that changes to a type without a cluster IP (or node
 * ports) loses the allocated values the request left as they were, so they are released.
 */
function dropTypeDependentFields(spec: Record<string, unknown>, was: Record<string, unknown>): void {
  const same = (k: string): boolean => JSON.stringify(spec[k] ?? null) === JSON.stringify(was[k] ?? null);
  if (needsClusterIP(was) && !needsClusterIP(spec)) {
    if (same('clusterIP') && same('clusterIPs')) {
      delete spec['clusterIP'];
      delete spec['clusterIPs'];
    }
    if (same('ipFamilies')) delete spec['ipFamilies'];
    if (same('ipFamilyPolicy')) delete spec['ipFamilyPolicy'];
  }
  const nodePortsOf = (s: Record<string, unknown>): string => JSON.stringify(portsOf(s).map((p) => p['nodePort'] ?? 0));
  if (needsNodePort(was) && !needsNodePort(spec) && nodePortsOf(spec) === nodePortsOf(was))
    for (const p of portsOf(spec)) delete p['nodePort'];
}

/** patchAllocatedValues for cluster IPs and IP families: what the request left out stays as stored. */
function carryAllocated(spec: Record<string, unknown>, was: Record<string, unknown>): void {
  if (spec['clusterIP'] === undefined || spec['clusterIP'] === '') {
    if (was['clusterIP'] !== undefined) spec['clusterIP'] = was['clusterIP'];
  }
  if (ipsOf(spec).length === 0 && ipsOf(was).length > 0) spec['clusterIPs'] = [...ipsOf(was)];
  if ((!Array.isArray(spec['ipFamilies']) || spec['ipFamilies'].length === 0) && Array.isArray(was['ipFamilies']))
    spec['ipFamilies'] = [...(was['ipFamilies'] as unknown[])];
}

/** patchAllocatedValues for node ports: a port the request left at 0 keeps its stored node port, by port name. */
function carryNodePorts(spec: Record<string, unknown>, was: Record<string, unknown>): void {
  const nodePorts = (s: Record<string, unknown>): Set<unknown> =>
    new Set(
      portsOf(s)
        .map((p) => p['nodePort'])
        .filter((n) => n !== undefined && n !== 0),
    );
  const before = nodePorts(was);
  const now = nodePorts(spec);
  const byName = new Map(portsOf(was).map((p) => [p['name'] ?? '', p['nodePort']]));
  for (const p of portsOf(spec)) {
    if (p['nodePort'] !== undefined && p['nodePort'] !== 0) continue;
    const np = byName.get(p['name'] ?? '');
    if (typeof np === 'number' && np !== 0 && !(before.has(np) && now.has(np))) p['nodePort'] = np;
  }
}

/** Allocate a node port for every port without one, and check the ones asked for (kube's nodePort allocator). */
function allocateNodePorts(
  spec: Record<string, unknown>,
  was: Record<string, unknown> | undefined,
  taken: () => AddressesInUse,
  refuse: (causes: StatusCause[]) => never,
): void {
  const held = new Set(portsOf(was).map((p) => p['nodePort']));
  const mine = new Set<number>();
  portsOf(spec).forEach((p, i) => {
    const np = p['nodePort'];
    if (typeof np === 'number' && np !== 0) {
      if (held.has(np) || mine.has(np)) {
        mine.add(np);
        return;
      }
      const why =
        np < NODE_PORT_MIN || np > NODE_PORT_MAX
          ? `provided port is not in the valid range. The range of valid ports is ${NODE_PORT_MIN}-${NODE_PORT_MAX}`
          : taken().nodePorts.has(np)
            ? 'provided port is already allocated'
            : undefined;
      if (why !== undefined)
        refuse([{ reason: 'FieldValueInvalid', field: `spec.ports[${i}].nodePort`, message: `Invalid value: ${np}: ${why}` }]);
      mine.add(np);
      return;
    }
    const free = randomFree(
      NODE_PORT_MIN,
      NODE_PORT_MAX,
      (n) => n,
      (n) => mine.has(n) || taken().nodePorts.has(n),
    );
    if (free === undefined) throw new Error(`failed to allocate a nodePort: range is full (${NODE_PORT_MIN}-${NODE_PORT_MAX})`);
    p['nodePort'] = free;
    mine.add(free);
  });
}
