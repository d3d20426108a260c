import { ApiError, badRequest } from '@kars/kube-core';
import protobuf from 'protobufjs';
import { BUILTIN_KINDS, PROTO_FILES } from '../kinds/generated.js';

/**
 * Kubernetes protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`),
 * decoded into exactly the JSON object the same client would have sent as JSON.
 *
 * Wire format: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message whose `typeMeta`
 * names apiVersion and kind and whose `raw` holds the kind's own message (ConfigMap, ...).
 * The message definitions are generated from Kubernetes' generated.proto and types.go
 * (src/kinds/generated.ts, scripts/gen-kube-schema.mjs); protobufjs does the wire decoding.
 *
 * Guarantees:
 * - Go's JSON rules are followed field by field: a non-pointer scalar that is zero is left out
 *   (kube writes every non-pointer field on the wire, JSON's omitempty drops it); a pointer
 *   field that is present is kept even when zero (`replicas: 0`, `immutable: false`); a present
 *   message is kept (`resources: {}`), except a zero Time, which Go prints as null (left out).
 * - Time → RFC 3339 in UTC with seconds; MicroTime → with microseconds; bytes → base64;
 *   Quantity → its string; IntOrString → number or string; FieldsV1/RawExtension → their JSON.
 * - Any malformed input (bad magic, truncated varint, wrong wire type, raw that is not the named
 *   kind, invalid UTF-8 JSON in a raw field) is a 400 BadRequest, never an exception escaping.
 *
 * Caveats: kinds without a definition here (custom resources, CRDs) are refused with 415 by
 * {@link decodeProtobuf}'s caller, as kube-apiserver refuses protobuf for custom resources.
 */

/** The media type of Kubernetes protobuf. */
export const PROTOBUF_MEDIA_TYPE = 'application/vnd.kubernetes.protobuf';

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

const UNKNOWN = 'k8s.io.apimachinery.pkg.runtime.Unknown';
const SPECIAL: Record<string, 'time' | 'microtime' | 'duration' | 'rawjson' | 'quantity' | 'intorstring'> = {
  'k8s.io.apimachinery.pkg.apis.meta.v1.Time': 'time',
  'k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime': 'microtime',
  'k8s.io.apimachinery.pkg.apis.meta.v1.Duration': 'duration',
  'k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1': 'rawjson',
  'k8s.io.apimachinery.pkg.runtime.RawExtension': 'rawjson',
  'k8s.io.apimachinery.pkg.api.resource.Quantity': 'quantity',
  'k8s.io.apimachinery.pkg.util.intstr.IntOrString': 'intorstring',
};

let root: protobuf.Root | undefined;
let byGvk: Map<string, protobuf.Type> | undefined;

/** Parse the definitions once, on first use (nothing happens at import time). */
function types(): { root: protobuf.Root; byGvk: Map<string, protobuf.Type> } {
  if (!root || !byGvk) {
    const r = new protobuf.Root();
    for (const f of PROTO_FILES) protobuf.parse(f.text, r, { keepCase: true });
    r.resolveAll();
    const m = new Map<string, protobuf.Type>();
    for (const k of BUILTIN_KINDS) m.set(gvkKey(k.group, k.version, k.kind), r.lookupType(k.message));
    root = r;
    byGvk = m;
  }
  return { root, byGvk };
}

function gvkKey(group: string, version: string, kind: string): string {
  return `${group}/${version}/${kind}`;
}

function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf('/');
  return i < 0 ? { group: '', version: apiVersion } : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

/** The protobuf message type of a built-in group/version/kind (its fields carry the Go JSON options). */
export function protobufType(group: string, version: string, kind: string): protobuf.Type | undefined {
  return types().byGvk.get(gvkKey(group, version, kind));
}

/** Whether a message (fully qualified, without the leading dot) is a scalar in JSON (Time, Quantity, …). */
export function isScalarMessage(fullName: string): boolean {
  return Object.hasOwn(SPECIAL, fullName.replace(/^\./, ''));
}

/** Whether a group/version/kind has a protobuf definition (so its bodies can be decoded). */
export function hasProtobuf(group: string, version: string, kind: string): boolean {
  return types().byGvk.has(gvkKey(group, version, kind)) || kind === 'DeleteOptions';
}

/** Whether a Content-Type names Kubernetes protobuf. */
export function isProtobuf(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() === PROTOBUF_MEDIA_TYPE;
}

/**
 * Decode a protobuf request body into the JSON object kube would build from it.
 * Throws ApiError 400 for malformed bodies, 415 for a kind without a definition.
 */
export function decodeProtobuf(body: Uint8Array): Record<string, unknown> {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (buf.length < MAGIC.length || !buf.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw badRequest('the protobuf body does not start with the Kubernetes magic number "k8s\\x00"');
  }
  const { root: r, byGvk: kinds } = types();
  let envelope: protobuf.Message;
  try {
    envelope = r.lookupType(UNKNOWN).decode(buf.subarray(MAGIC.length));
  } catch (err) {
    throw badRequest(`error decoding the protobuf envelope: ${errText(err)}`, err);
  }
  const env = envelope as unknown as {
    typeMeta?: { apiVersion?: string; kind?: string };
    raw?: Uint8Array;
    contentEncoding?: string;
    contentType?: string;
  };
  const apiVersion = env.typeMeta?.apiVersion ?? '';
  const kind = env.typeMeta?.kind ?? '';
  if (env.contentEncoding) throw badRequest(`unsupported protobuf content encoding "${env.contentEncoding}"`);
  if (kind === '') throw badRequest('the protobuf envelope does not name a kind');
  const { group, version } = splitApiVersion(apiVersion);
  const type =
    kinds.get(gvkKey(group, version, kind)) ??
    (kind === 'DeleteOptions' ? r.lookupType('k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions') : undefined);
  if (!type) throw unsupported(apiVersion, kind);
  let msg: protobuf.Message;
  try {
    msg = type.decode(env.raw ?? new Uint8Array());
  } catch (err) {
    throw badRequest(`error decoding ${kind} from protobuf: ${errText(err)}`, err);
  }
  return { apiVersion, kind, ...toJson(type, msg) };
}

/** The 415 answer for a protobuf body of a kind kars has no definition for. */
export function unsupported(apiVersion: string, kind: string): ApiError {
  return new ApiError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (no protobuf definition for ${apiVersion ? apiVersion + ', ' : ''}Kind=${kind})`,
  );
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Convert a decoded message to JSON by the kars.json / kars.ptr / kars.inline field options. */
function toJson(type: protobuf.Type, msg: protobuf.Message): Record<string, Json> {
  const out: Record<string, Json> = {};
  const m = msg as unknown as Record<string, unknown>;
  for (const field of type.fieldsArray) {
    if (!Object.prototype.hasOwnProperty.call(m, field.name)) continue;
    const v = m[field.name];
    const opts = field.options ?? {};
    if (opts['(kars.inline)'] === true) {
      if (field.resolvedType instanceof protobuf.Type && v) Object.assign(out, toJson(field.resolvedType, v as protobuf.Message));
      continue;
    }
    const name = typeof opts['(kars.json)'] === 'string' ? opts['(kars.json)'] : field.name;
    const ptr = opts['(kars.ptr)'] === true;
    if (field.map) {
      const entries = Object.entries(v as Record<string, unknown>);
      if (entries.length === 0) continue;
      const obj: Record<string, Json> = {};
      for (const [k, x] of entries) {
        const j = value(field, x);
        if (j !== undefined) obj[k] = j;
      }
      out[name] = obj;
    } else if (field.repeated) {
      const arr = v as unknown[];
      if (arr.length === 0) continue;
      out[name] = arr.map((x) => value(field, x) ?? null);
    } else {
      const j = value(field, v);
      if (j === undefined) continue;
      if (!ptr && !field.resolvedType && isZero(j)) continue;
      out[name] = j;
    }
  }
  return out;
}

function isZero(j: Json): boolean {
  return j === '' || j === 0 || j === false;
}

/** One value of a field; undefined means "leave the field out" (a zero Time). */
function value(field: protobuf.Field, v: unknown): Json | undefined {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) {
    const sub = v as Record<string, unknown>;
    // A Go named slice (ExtraValue): the JSON is the bare array.
    if (t.options?.['(kars.items)'] === true)
      return Array.isArray(sub['items'])
        ? (sub['items'] as unknown[]).map((x) => value(t.fields['items'] as protobuf.Field, x) ?? null)
        : [];
    const special = SPECIAL[t.fullName.replace(/^\./, '')];
    switch (special) {
      case 'time':
        return isZeroTime(sub) ? undefined : formatTime(sub, false);
      case 'microtime':
        return isZeroTime(sub) ? undefined : formatTime(sub, true);
      case 'duration':
        return formatDuration(num(sub['duration']));
      case 'rawjson':
        return rawJson(sub['Raw'] ?? sub['raw']);
      case 'quantity':
        return typeof sub['string'] === 'string' ? sub['string'] : '0';
      case 'intorstring':
        return num(sub['type']) === 1 ? (typeof sub['strVal'] === 'string' ? sub['strVal'] : '') : num(sub['intVal']);
      default:
        return toJson(t, v as protobuf.Message);
    }
  }
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return v;
  if (v !== null && typeof v === 'object' && 'low' in v) return num(v);
  throw badRequest(`unexpected protobuf value for ${field.name}`);
}

/** int64 values arrive as numbers or Longs; kube's int64 fields all fit a double in practice. */
function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (v !== null && typeof v === 'object' && 'low' in v && 'high' in v) {
    const l = v as { low: number; high: number; unsigned?: boolean };
    return l.high * 0x1_0000_0000 + (l.low >>> 0);
  }
  return 0;
}

function isZeroTime(t: Record<string, unknown>): boolean {
  return !Object.prototype.hasOwnProperty.call(t, 'seconds') && !Object.prototype.hasOwnProperty.call(t, 'nanos');
}

/** metav1.Time (seconds) or metav1.MicroTime (microseconds), in UTC as kube's JSON writes them. */
function formatTime(t: Record<string, unknown>, micro: boolean): string {
  const seconds = num(t['seconds']);
  const nanos = num(t['nanos']);
  const d = new Date(seconds * 1000);
  if (Number.isNaN(d.getTime())) throw badRequest(`time out of range: ${seconds}s`);
  const base = d.toISOString().slice(0, 19);
  if (!micro) return `${base}Z`;
  return `${base}.${String(Math.floor(nanos / 1000)).padStart(6, '0')}Z`;
}

/** Go's time.Duration.String(), for metav1.Duration. */
function formatDuration(ns: number): string {
  if (ns === 0) return '0s';
  const neg = ns < 0;
  let rest = Math.abs(ns);
  let out: string;
  if (rest < 1e9) {
    out = rest < 1e3 ? `${rest}ns` : rest < 1e6 ? `${trim(rest / 1e3)}µs` : `${trim(rest / 1e6)}ms`;
  } else {
    const h = Math.floor(rest / 3.6e12);
    rest -= h * 3.6e12;
    const m = Math.floor(rest / 6e10);
    rest -= m * 6e10;
    const s = `${trim(rest / 1e9)}s`;
    out = h > 0 ? `${h}h${m}m${s}` : m > 0 ? `${m}m${s}` : s;
  }
  return neg ? `-${out}` : out;
}

function trim(n: number): string {
  return String(Number(n.toFixed(9)));
}

function rawJson(raw: unknown): Json | undefined {
  if (!(raw instanceof Uint8Array) || raw.length === 0) return undefined;
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  try {
    return JSON.parse(text) as Json;
  } catch (err) {
    throw badRequest(`embedded JSON in a protobuf body is invalid: ${errText(err)}`, err);
  }
}
