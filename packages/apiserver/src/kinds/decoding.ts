/**
 * What kube-apiserver's decoding of a built-in kind does to a body before anything tracks or stores
 * it (its v1 → internal conversion and Go's encoding of fields without omitempty), for the kinds
 * where a client sees the effect:
 * - Secret: `stringData` is write-only; each entry is merged into `data` (base64 of its UTF-8) and
 *   `stringData` dropped.
 * - core/v1 Event: `firstTimestamp`, `lastTimestamp`, `eventTime` (null when unset),
 *   `reportingComponent`, `reportingInstance` ("") and `source` ({}) have no omitempty: always written.
 * - apps/v1 Deployment: kube's defaulting (SetDefaults_Deployment, and SetDefaults_PodSpec and
 *   SetDefaults_Container for its pod template), for the fields a Deployment without pods shows.
 * - Secret: no type means Opaque.
 * - Service: kube's SetDefaults_Service (type, sessionAffinity, each port's protocol and targetPort,
 *   the traffic policies). What kube's Service storage allocates (cluster IPs, IP families, node
 *   ports) is `../service-addresses.ts`'s, after managedFields are tracked.
 */
import { isObject } from '@kars/kube-core';

/** The Event fields Go always writes, with their zero values. */
export const EVENT_ZERO_FIELDS: Readonly<Record<string, unknown>> = {
  firstTimestamp: null,
  lastTimestamp: null,
  eventTime: null,
  reportingComponent: '',
  reportingInstance: '',
  source: {},
};

/** Apply kube's decoding of `group`/`resource` to `obj` in place. */
export function decodeBuiltin(group: string, resource: string, obj: Record<string, unknown>): void {
  if (group === 'apps' && resource === 'deployments') return defaultDeployment(obj);
  if (group !== '') return;
  if (resource === 'services') return defaultService(obj);
  if (resource === 'secrets') {
    if (obj['type'] === undefined || obj['type'] === '') obj['type'] = 'Opaque';
    const sd = obj['stringData'];
    if (isObject(sd)) {
      const data: Record<string, unknown> = isObject(obj['data']) ? { ...obj['data'] } : {};
      for (const [k, v] of Object.entries(sd)) if (typeof v === 'string') data[k] = Buffer.from(v, 'utf8').toString('base64');
      if (Object.keys(data).length > 0) obj['data'] = data;
    }
    if (sd !== undefined) delete obj['stringData'];
  } else if (resource === 'events') {
    for (const [k, zero] of Object.entries(EVENT_ZERO_FIELDS)) if (obj[k] === undefined) obj[k] = isObject(zero) ? {} : zero;
  }
}

const setDefault = (o: Record<string, unknown>, k: string, v: unknown): void => {
  if (o[k] === undefined || o[k] === null) o[k] = v;
};

/** kube's imagePullPolicy default: Always for `:latest` or no tag, else IfNotPresent. */
function pullPolicy(image: unknown): string {
  if (typeof image !== 'string') return 'IfNotPresent';
  if (image.includes('@')) return 'IfNotPresent';
  const last = image.slice(image.lastIndexOf('/') + 1);
  const tag = last.includes(':') ? last.slice(last.indexOf(':') + 1) : '';
  return tag === '' || tag === 'latest' ? 'Always' : 'IfNotPresent';
}

function defaultContainer(c: Record<string, unknown>): void {
  setDefault(c, 'imagePullPolicy', pullPolicy(c['image']));
  setDefault(c, 'resources', {});
  setDefault(c, 'terminationMessagePath', '/dev/termination-log');
  setDefault(c, 'terminationMessagePolicy', 'File');
  if (Array.isArray(c['ports'])) for (const p of c['ports']) if (isObject(p)) setDefault(p, 'protocol', 'TCP');
}

function defaultPodSpec(spec: Record<string, unknown>): void {
  setDefault(spec, 'dnsPolicy', 'ClusterFirst');
  setDefault(spec, 'restartPolicy', 'Always');
  setDefault(spec, 'schedulerName', 'default-scheduler');
  setDefault(spec, 'securityContext', {});
  setDefault(spec, 'terminationGracePeriodSeconds', 30);
  for (const list of ['containers', 'initContainers'])
    if (Array.isArray(spec[list])) for (const c of spec[list] as unknown[]) if (isObject(c)) defaultContainer(c);
}

/** kube's defaults of an apps/v1 Deployment (in place). */
export function defaultDeployment(obj: Record<string, unknown>): void {
  const spec = obj['spec'];
  if (!isObject(spec)) return;
  setDefault(spec, 'replicas', 1);
  setDefault(spec, 'revisionHistoryLimit', 10);
  setDefault(spec, 'progressDeadlineSeconds', 600);
  setDefault(spec, 'strategy', {});
  const strategy = spec['strategy'] as Record<string, unknown>;
  setDefault(strategy, 'type', 'RollingUpdate');
  if (strategy['type'] === 'RollingUpdate') {
    setDefault(strategy, 'rollingUpdate', {});
    const ru = strategy['rollingUpdate'];
    if (isObject(ru)) {
      setDefault(ru, 'maxUnavailable', '25%');
      setDefault(ru, 'maxSurge', '25%');
    }
  }
  const template = spec['template'];
  if (isObject(template) && isObject(template['spec'])) defaultPodSpec(template['spec']);
}

/** kube's ServiceAffinityClientIP default timeout: three hours. */
const DEFAULT_CLIENT_IP_AFFINITY_SECONDS = 10800;

/** Whether a Service of this type is reachable from outside the cluster (kube's ExternallyAccessible, for types). */
const externallyAccessible = (type: unknown): boolean => type === 'NodePort' || type === 'LoadBalancer';

/** kube's defaults of a core/v1 Service (SetDefaults_Service), in place. */
export function defaultService(obj: Record<string, unknown>): void {
  const spec = obj['spec'];
  if (!isObject(spec)) return;
  if (spec['sessionAffinity'] === undefined || spec['sessionAffinity'] === '' || spec['sessionAffinity'] === null)
    spec['sessionAffinity'] = 'None';
  if (spec['sessionAffinity'] === 'None') delete spec['sessionAffinityConfig'];
  if (spec['sessionAffinity'] === 'ClientIP') {
    const config = spec['sessionAffinityConfig'];
    const clientIP = isObject(config) ? config['clientIP'] : undefined;
    if (!isObject(clientIP) || clientIP['timeoutSeconds'] === undefined || clientIP['timeoutSeconds'] === null)
      spec['sessionAffinityConfig'] = { clientIP: { timeoutSeconds: DEFAULT_CLIENT_IP_AFFINITY_SECONDS } };
  }
  if (spec['type'] === undefined || spec['type'] === '' || spec['type'] === null) spec['type'] = 'ClusterIP';
  if (Array.isArray(spec['ports'])) {
    for (const p of spec['ports']) {
      if (!isObject(p)) continue;
      if (p['protocol'] === undefined || p['protocol'] === '' || p['protocol'] === null) p['protocol'] = 'TCP';
      // An unset targetPort is the IntOrString zero value (0 or ""): it becomes the port itself.
      if (p['targetPort'] === undefined || p['targetPort'] === null || p['targetPort'] === 0 || p['targetPort'] === '')
        p['targetPort'] = p['port'] ?? 0;
    }
  }
  const type = spec['type'];
  if (externallyAccessible(type) && (spec['externalTrafficPolicy'] === undefined || spec['externalTrafficPolicy'] === ''))
    spec['externalTrafficPolicy'] = 'Cluster';
  if (
    (spec['internalTrafficPolicy'] === undefined || spec['internalTrafficPolicy'] === null) &&
    (type === 'ClusterIP' || externallyAccessible(type))
  )
    spec['internalTrafficPolicy'] = 'Cluster';
  if (type === 'LoadBalancer' && (spec['allocateLoadBalancerNodePorts'] === undefined || spec['allocateLoadBalancerNodePorts'] === null))
    spec['allocateLoadBalancerNodePorts'] = true;
}
