import {
  ApiError,
  authorizationValues,
  badRequest,
  expired,
  notFound,
  parseFieldSelector,
  parseLabelSelector,
  toApiError,
} from '@kars/kube-core';
import type { KubeObject, Logger, Status } from '@kars/kube-core';
import type { FieldValidation } from '../admission.js';
import { authorizeCreateOnPatch, checkAccess } from '../auth/hook.js';
import type { Access } from '../auth/hook.js';
import type { Auth } from '../auth/authorizer.js';
import type { Registry } from '../registry/registry.js';
import type { ResourceInfo } from '../registry/resource.js';
import { grKey } from '../registry/resource.js';
import type { DeleteOptions, ListOptions, ObjectService, PatchType, Target, WriteOptions } from '../service.js';
import { selects } from '../watch/cache.js';
import type { WatchCache, WatchFilter } from '../watch/cache.js';
import { decodeBody, readBody } from './body.js';
import { decodeJsonPatchBody } from './object-body.js';
import { decodeAnyBody, decodeDeleteOptions, decodeWriteBody, prefersYaml, requireJsonAcceptable } from './negotiate.js';
import type { Req, Res } from './compat.js';
import { answerInYaml, sendJson } from './compat.js';
import { apiVersions, group, groupList, resourceList } from './discovery.js';
import { OpenApiDocuments, serveOpenApi } from './openapi.js';
import { listItemObject, listItemText } from './list-items.js';
import {
  checkFieldLabels,
  refuseFutureRevision,
  requestedRevision,
  validateDeleteOptions,
  validateListOptions,
  validateWriteOptions,
} from './options.js';
import {
  builtinRouteServes,
  isBuiltinGroup,
  requireCustomAccepts,
  requireRouteAccepts,
  restfulClaims,
  routeNotFound,
  sendPageNotFound,
} from './restful.js';
import { finalizeNamespace } from '../namespace.js';
import { parseRoute } from './route.js';
import type { Route } from './route.js';
import { toTable, wantsTable } from './table.js';
import type { IncludeObject } from './table.js';
import { DEFAULT_WATCH_BUFFER_BYTES, WatchStream } from './watch.js';

/** What the handler needs from the server around it. */
export interface HandlerContext {
  registry: Registry;
  service: ObjectService;
  cache: WatchCache;
  /** Authentication (admin token, ServiceAccount tokens) and authorization (AlwaysAllow or RBAC). */
  auth: Auth;
  serverAddress: string;
  bookmarkIntervalMs: number;
  minRequestTimeoutSeconds: number;
  /** Called for every new watch stream, so fault injection can find and freeze it. */
  onWatch: (w: WatchStream, req: Req) => void;
  /** Test-only fault endpoints; undefined when fault injection is off. */
  faults?: (action: string, query: URLSearchParams) => Promise<unknown>;
  log: Logger;
}

const PUBLIC = new Set(['health', 'version']);

const VERSION_INFO = {
  major: '1',
  minor: '31',
  gitVersion: 'v1.31.0-kars',
  gitCommit: 'kars',
  gitTreeState: 'clean',
  buildDate: '2026-11-30T00:00:00Z',
  goVersion: 'n/a',
  compiler: 'node',
  platform: `${process.platform}/${process.arch}`,
};

function manager(q: URLSearchParams, req: Req): string {
  const fm = q.get('fieldManager');
  if (fm) return fm;
  const ua = req.headers['user-agent'];
  const prefix = typeof ua === 'string' ? ua.split('/')[0] : '';
  return prefix && prefix !== '' ? prefix : 'unknown';
}

/** The write's field validation: `Warn` unless the query says otherwise (validateWriteOptions has refused any other value). */
function fieldValidation(q: URLSearchParams): FieldValidation {
  const v = q.get('fieldValidation');
  return v === 'Strict' || v === 'Ignore' ? v : 'Warn';
}

function patchType(contentType: string | undefined): PatchType {
  const ct = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
  switch (ct) {
    case 'application/merge-patch+json':
      return 'merge';
    case 'application/json-patch+json':
      return 'json';
    case 'application/strategic-merge-patch+json':
      return 'strategic';
    case 'application/apply-patch+yaml':
    case 'application/apply-patch+cbor':
      return 'apply';
    default:
      // kube's PATCH handler refuses an unknown patch type before decoding anything, in these words.
      throw new ApiError(415, 'UnsupportedMediaType', '415: Unsupported Media Type', {});
  }
}

function intParam(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw badRequest(`invalid value for ${name}: "${v}"`);
  return n;
}

/**
 * `Warning: 299 - "<text>"` headers, quoted as kube-apiserver quotes them (`"` and `\` escaped).
 * Header values must be ASCII here: Node refuses characters beyond Latin-1 (a write would be
 * answered 500 after it committed) and re-encodes Latin-1 as UTF-8 on some paths. So every
 * character outside printable ASCII (an unknown field named `spec.ключ`, a control character) is
 * written as a `\uXXXX` escape, which reads the same in kubectl on HTTP/1.1 and HTTP/2.
 */
function warningHeaders(warnings: string[]): Record<string, string> {
  if (warnings.length === 0) return {};
  const quote = (w: string): string =>
    `299 - "${w
      .replace(/["\\]/g, (c) => `\\${c}`)
      .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
  return { warning: warnings.map(quote).join(', ') };
}

/**
 * The HTTP request handler: authentication, routing, body decoding, and the mapping of
 * every failure to a metav1.Status. It never throws; every path answers.
 */
export function createHandler(ctx: HandlerContext): (req: Req, res: Res) => void {
  const openapi = new OpenApiDocuments(ctx.registry);
  return (req, res) => {
    handle(ctx, openapi, req, res).catch((err: unknown) => {
      const e = toApiError(err);
      if (e.code >= 500)
        ctx.log.error({ method: req.method, url: req.url, err: e.cause instanceof Error ? e.cause : e.message }, 'request failed');
      try {
        sendJson(res, e.code, e.toStatus());
      } catch {
        res.destroy();
      }
    });
  };
}

async function handle(ctx: HandlerContext, openapi: OpenApiDocuments, req: Req, res: Res): Promise<void> {
  // A malformed URL is answered only after authentication: 401 without a valid token, 400 with one.
  let malformed: ApiError | undefined;
  let url: URL;
  let route: Route;
  try {
    url = new URL(req.url ?? '/', 'https://kars.invalid');
    route = parseRoute(url.pathname);
  } catch (err) {
    malformed = badRequest(`malformed request path: ${err instanceof Error ? err.message : String(err)}`, err);
    url = new URL('https://kars.invalid/');
    route = { kind: 'unknown' };
  }
  const method = (req.method ?? 'GET').toUpperCase();
  // Health and version need no credentials; but credentials that are sent are checked, as kube-apiserver
  // checks them (a bad token is a 401 even on /healthz).
  const access =
    PUBLIC.has(route.kind) && authorizationValues(req.rawHeaders).length === 0
      ? undefined
      : await checkAccess(
          ctx.auth,
          authorizationValues(req.rawHeaders),
          route,
          method,
          url,
          () => readJson(req),
          manager(url.searchParams, req),
        );
  if (malformed) throw malformed;
  if (access?.answer) return sendJson(res, access.answer.code, access.answer.body);
  switch (route.kind) {
    case 'health':
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('ok');
      return;
    case 'version':
      return sendJson(res, 200, VERSION_INFO);
    case 'legacyRoot':
      return sendJson(res, 200, apiVersions(ctx.serverAddress));
    case 'groupList':
      return sendJson(res, 200, groupList(ctx.registry));
    case 'group': {
      const g = group(ctx.registry, route.group);
      if (!g) return sendPageNotFound(res);
      return sendJson(res, 200, g);
    }
    case 'resourceList': {
      const l = resourceList(ctx.registry, route.group, route.version);
      if (l) return sendJson(res, 200, l);
      if (isBuiltinGroup(ctx.registry, route.group)) throw routeNotFound();
      return sendPageNotFound(res);
    }
    case 'faults': {
      if (!ctx.faults || method !== 'POST') throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
      return sendJson(res, 200, await ctx.faults(route.action, url.searchParams));
    }
    case 'openapi':
      return serveOpenApi(openapi, req, res, route.path);
    case 'unknown':
      if (restfulClaims(ctx.registry, url.pathname)) throw routeNotFound();
      return sendPageNotFound(res);
    case 'object':
      return handleObject(ctx, req, res, route, method, url.searchParams, access);
  }
}

async function handleObject(
  ctx: HandlerContext,
  req: Req,
  res: Res,
  route: Extract<Route, { kind: 'object' }>,
  method: string,
  q: URLSearchParams,
  access: Access | undefined,
): Promise<void> {
  const ri = ctx.registry.lookup(route.group, route.version, route.resource);
  if (!ri) {
    if (isBuiltinGroup(ctx.registry, route.group)) throw routeNotFound();
    return sendPageNotFound(res);
  }
  const allNamespaces = ri.namespaced && route.namespace === undefined;
  if (ri.builtin) {
    // Paths no go-restful route of a built-in resource fits.
    if (route.namespace !== undefined && !ri.namespaced) throw routeNotFound();
    if (
      route.subresource !== undefined &&
      !(route.subresource === 'status' && ri.hasStatus) &&
      !(ri.resource === 'namespaces' && route.subresource === 'finalize')
    )
      throw routeNotFound();
    if (allNamespaces && route.name !== undefined) throw routeNotFound();
    if (builtinRouteServes(method, route.name !== undefined, allNamespaces))
      requireRouteAccepts(req.headers['accept'], method === 'GET' && (route.name === undefined || route.watchPath));
  } else {
    // The custom resource handler passes a request at the wrong scope on to the Go mux's plain 404;
    // only a list or watch may span all namespaces.
    if (route.namespace !== undefined && !ri.namespaced) return sendPageNotFound(res);
    if (allNamespaces && !(method === 'GET' && (route.name === undefined || route.watchPath))) return sendPageNotFound(res);
    if (route.subresource !== undefined && !(route.subresource === 'status' && ri.hasStatus))
      throw notFound({ group: ri.group, resource: ri.resource, name: route.name ?? '' });
    requireCustomAccepts(req.headers['accept']);
  }
  const ns = ri.namespaced ? route.namespace : undefined;
  const t: Target = { ri, version: route.version, ns: ns ?? '', name: route.name ?? '' };
  if (route.subresource === 'status') t.subresource = 'status';
  requireJsonAcceptable(req.headers['accept']);
  if (prefersYaml(req.headers['accept']) && !wantsTable(req.headers['accept'])) answerInYaml(res);
  const isWatch = route.watchPath || q.get('watch') === 'true' || q.get('watch') === '1';
  const dryRun = q.getAll('dryRun').includes('All');

  if (method === 'PUT' && route.subresource === 'finalize' && route.name !== undefined) {
    const body = await decodeWriteBody(ri, await readBody(req, lengthOf(req)), req.headers['content-type']);
    const r = await ctx.service.modify(t, (next) => finalizeNamespace(next, body.value));
    return sendJson(res, r.code, r.body ?? r.object, warningHeaders(r.warnings));
  }
  if (method === 'GET' && isWatch) return serveWatch(ctx, req, res, { ri, version: route.version, ns, q }, route.name);
  if (method === 'GET' && route.name !== undefined) {
    const obj = ctx.service.get(t);
    if (wantsTable(req.headers['accept']))
      return sendJson(res, 200, toTable(ri, route.version, [obj], { resourceVersion: obj.metadata.resourceVersion }, includeObject(q)));
    return sendJson(res, 200, obj);
  }
  if (method === 'GET') return serveList(ctx, req, res, { ri, version: route.version, ns, q });

  const writeOpts = (): WriteOptions => ({ dryRun, manager: manager(q, req), fieldValidation: fieldValidation(q) });
  if (method === 'POST' && route.name === undefined) {
    if (ri.namespaced && ns === undefined)
      throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
    validateWriteOptions('CreateOptions', q);
    const body = await decodeWriteBody(ri, await readBody(req, lengthOf(req)), req.headers['content-type']);
    const r = await ctx.service.create(t, body.value, { ...writeOpts(), strictErrors: body.strictErrors });
    return sendJson(res, r.code, r.body ?? r.object, warningHeaders(r.warnings));
  }
  if (method === 'PUT' && route.name !== undefined) {
    validateWriteOptions('UpdateOptions', q);
    const body = await decodeWriteBody(ri, await readBody(req, lengthOf(req)), req.headers['content-type']);
    const r = await ctx.service.update(t, body.value, { ...writeOpts(), strictErrors: body.strictErrors });
    return sendJson(res, r.code, r.body ?? r.object, warningHeaders(r.warnings));
  }
  if (method === 'PATCH' && route.name !== undefined) {
    const type = patchType(req.headers['content-type']);
    const raw = await readBody(req, lengthOf(req));
    validateWriteOptions('PatchOptions', q, type === 'apply');
    const body = type === 'apply' ? await decodeBody(raw, 'application/yaml') : decodeJsonPatchBody(raw, type, fieldValidation(q));
    const force = q.get('force') === 'true';
    // kube-apiserver authorizes `create` too when the patch would create the object.
    const authorizeCreate = access ? (): void => authorizeCreateOnPatch(ctx.auth, access) : undefined;
    const r = await ctx.service.patch(t, type, body, {
      ...writeOpts(),
      force,
      ...(authorizeCreate ? { authorizeCreate } : {}),
    });
    return sendJson(res, r.code, r.body ?? r.object, warningHeaders(r.warnings));
  }
  if (method === 'DELETE') {
    const raw = await readBody(req, lengthOf(req));
    const opts = await decodeDeleteOptions(raw, req.headers['content-type']);
    const pre = (opts['preconditions'] ?? {}) as Record<string, unknown>;
    const dr = dryRun || (Array.isArray(opts['dryRun']) && opts['dryRun'].includes('All'));
    const propagationPolicy =
      (typeof opts['propagationPolicy'] === 'string' ? opts['propagationPolicy'] : undefined) ?? q.get('propagationPolicy') ?? undefined;
    validateDeleteOptions(propagationPolicy, Array.isArray(opts['dryRun']) ? opts['dryRun'].map(String) : q.getAll('dryRun'));
    // Set field by field: conditional object spreads make V8 build slow dictionary objects.
    const delOpts: DeleteOptions = { dryRun: dr };
    if (typeof pre['uid'] === 'string') delOpts.preconditionUid = pre['uid'];
    if (typeof pre['resourceVersion'] === 'string') delOpts.preconditionRv = pre['resourceVersion'];
    if (propagationPolicy) delOpts.propagationPolicy = propagationPolicy;
    if (route.name === undefined) {
      const list = ctx.service.list(ri, route.version, ns, listOptions(q, ri, route.version));
      const deleted: KubeObject[] = [];
      for (const body of list.items) {
        const o = JSON.parse(body) as KubeObject;
        deleted.push((await ctx.service.delete({ ...t, ns: o.metadata.namespace ?? '', name: o.metadata.name ?? '' }, delOpts)).object);
      }
      return sendJson(res, 200, {
        apiVersion: ri.group === '' ? route.version : `${ri.group}/${route.version}`,
        kind: ri.listKind,
        // kube answers a deletecollection with a list at the revision after the deletes.
        metadata: { resourceVersion: String(ctx.service.currentRv()), ...(ri.builtin ? {} : { continue: '' }) },
        items: deleted.map((o) => listItemObject(ri, o)),
      });
    }
    const r = await ctx.service.delete(t, delOpts);
    if (r.gone && !ri.deleteReturnsObject) {
      // kube's success Status for a delete carries no code.
      const status: Omit<Status, 'code'> = {
        apiVersion: 'v1',
        kind: 'Status',
        metadata: {},
        status: 'Success',
        details: {
          name: t.name,
          kind: ri.resource,
          ...(ri.group ? { group: ri.group } : {}),
          ...(r.object.metadata.uid ? { uid: r.object.metadata.uid } : {}),
        },
      };
      return sendJson(res, 200, status);
    }
    return sendJson(res, 200, r.body ?? r.object);
  }
  throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});
}

function readJson(req: Req): Promise<unknown> {
  return readBody(req, lengthOf(req)).then((b) => decodeAnyBody(b, req.headers['content-type']));
}

function lengthOf(req: Req): number | undefined {
  const h = req.headers['content-length'];
  return typeof h === 'string' && h !== '' ? Number(h) : undefined;
}

function includeObject(q: URLSearchParams): IncludeObject {
  const v = q.get('includeObject');
  return v === 'None' || v === 'Object' ? v : 'Metadata';
}

/** A list's (or watch's, or deletecollection's) selectors and paging of `ri` at `version`; a field label the kind does not support is refused. */
function listOptions(q: URLSearchParams, ri: ResourceInfo, version: string): ListOptions {
  const o: ListOptions = {};
  const ls = q.get('labelSelector');
  if (ls) o.labels = parseLabelSelector(ls);
  const fs = q.get('fieldSelector');
  if (fs) {
    o.fields = parseFieldSelector(fs);
    checkFieldLabels(ri, version, o.fields);
  }
  const limit = intParam(q, 'limit');
  if (limit !== undefined) o.limit = limit;
  const c = q.get('continue');
  if (c) o.continueToken = c;
  return o;
}

/** A list or watch of one resource: which resource, at which version, in which namespace (all: undefined), with which query. */
interface Collection {
  ri: ResourceInfo;
  version: string;
  ns: string | undefined;
  q: URLSearchParams;
}

function serveList(ctx: HandlerContext, req: Req, res: Res, { ri, version, ns, q }: Collection): void {
  validateListOptions(q, false);
  refuseFutureRevision(requestedRevision(q, false), ctx.service.currentRv());
  const opts = listOptions(q, ri, version);
  const r = ctx.service.list(ri, version, ns, opts);
  const meta: Record<string, unknown> = { resourceVersion: String(r.rv) };
  if (r.continue) meta['continue'] = r.continue;
  if (r.remainingItemCount !== undefined) meta['remainingItemCount'] = r.remainingItemCount;
  if (wantsTable(req.headers['accept'])) {
    return sendJson(
      res,
      200,
      toTable(
        ri,
        version,
        r.items.map((b) => JSON.parse(b) as KubeObject),
        meta,
        includeObject(q),
      ),
    );
  }
  // A custom resource's list is unstructured: kube keeps its empty continue (a Table has none).
  if (!ri.builtin && !r.continue) meta['continue'] = '';
  const apiVersion = ri.group === '' ? version : `${ri.group}/${version}`;
  const items = r.items.map((b) => listItemText(ri, apiVersion, b)).join(',');
  const text = `{"kind":"${ri.listKind}","apiVersion":"${apiVersion}","metadata":${JSON.stringify(meta)},"items":[${items}]}`;
  sendJson(res, 200, text);
}

function serveWatch(ctx: HandlerContext, req: Req, res: Res, { ri, version, ns, q }: Collection, name: string | undefined): void {
  validateListOptions(q, true);
  const requested = requestedRevision(q, true);
  const filter: WatchFilter = { gr: grKey(ri.group, ri.resource) };
  if (ns !== undefined) filter.ns = ns;
  const opts = listOptions(q, ri, version);
  if (opts.labels) filter.labels = opts.labels;
  const fields = opts.fields ?? [];
  if (name !== undefined) fields.push({ field: 'metadata.name', op: '=', value: name });
  if (fields.length > 0) filter.fields = fields;
  const timeoutParam = intParam(q, 'timeoutSeconds');
  const minTimeout = ctx.minRequestTimeoutSeconds;
  const timeoutMs = (timeoutParam !== undefined && timeoutParam > 0 ? timeoutParam : minTimeout * (1 + Math.random())) * 1000;
  const table = wantsTable(req.headers['accept']);
  const include = includeObject(q);
  const apiVersion = ri.group === '' ? version : `${ri.group}/${version}`;
  const stream = new WatchStream(res, {
    timeoutMs,
    bookmarks: q.get('allowWatchBookmarks') === 'true',
    bookmarkIntervalMs: ctx.bookmarkIntervalMs,
    currentRv: () => ctx.service.currentRv(),
    apiVersion: table ? 'meta.k8s.io/v1' : apiVersion,
    kind: table ? 'Table' : ri.kind,
    maxBufferedBytes: DEFAULT_WATCH_BUFFER_BYTES,
    render: (d) => {
      const body = ctx.service.render(ri, version, d.body);
      return table
        ? JSON.stringify(toTable(ri, version, [JSON.parse(body) as KubeObject], { resourceVersion: String(d.rv) }, include))
        : body;
    },
  });
  ctx.onWatch(stream, req);
  const rvParam = q.get('resourceVersion');
  const sendInitial = q.get('sendInitialEvents') === 'true';
  try {
    let from: number;
    if (rvParam === null || rvParam === '' || rvParam === '0' || sendInitial) {
      const snap = ctx.service.snapshot(ri, ns);
      for (const body of snap.bodies) {
        const o = JSON.parse(body) as KubeObject;
        if (!selects(filter, o)) continue;
        stream.deliver({ type: 'ADDED', rv: Number(o.metadata.resourceVersion), body });
      }
      from = snap.rv;
      if (sendInitial) stream.bookmark(true);
    } else {
      from = requested ?? 0;
    }
    const stop = ctx.cache.subscribe(filter, from, (d) => stream.deliver(d));
    stream.onClose(stop);
  } catch (err) {
    const e = err instanceof ApiError ? err : toApiError(err);
    stream.error(e.reason === 'Expired' ? expired(e.message).toStatus() : e.toStatus());
  }
}
