/**
 * The inference listener's route table: which paths the router serves, for which API, and the
 * refusal of every other path. Nothing is passed upstream that is not in this table: a path spelled
 * another way (case, a trailing or doubled slash, percent-encoding, dot segments) matches nothing
 * and is refused, so no spelling reaches an upstream ungoverned.
 *
 * | Path (POST)                                           | API                  |
 * |-------------------------------------------------------|----------------------|
 * | `/v1/chat/completions`, `/openai/v1/chat/completions`, `/openai/deployments/{d}/chat/completions` | chat |
 * | `/v1/responses`, `/openai/v1/responses`, `/openai/responses`, `/openai/deployments/{d}/responses` | responses |
 * | `/v1/embeddings`, `/openai/v1/embeddings`, `/openai/deployments/{d}/embeddings` | embeddings |
 * | `/v1/messages`                                        | Anthropic Messages   |
 * | `/v1/messages/count_tokens`                           | token counting (uncharged) |
 *
 * `GET /v1/models`, `/v1/models/{id}` and `/openai/v1/models` are passed to the provider's upstream
 * (a read: no body, nothing charged). Refused with their own reason: the stored-response endpoints
 * (`/v1/responses/{id}…`) and the batch APIs. Everything else: 404 listing the routes above.
 *
 * Guarantees: pure; the deployment segment of an Azure path is decoded once and re-encoded, and one
 * that decodes to a path separator, a dot segment, a `%` or a control character is refused.
 */
import { CHAT, COUNT_TOKENS, EMBEDDINGS, MESSAGES, RESPONSES, type InferenceApi, type Wire } from './apis.js';

/** A matched governed route. */
export interface ApiRoute {
  kind: 'api';
  api: InferenceApi;
  /** The path before the API's suffix, as the upstream is sent it (`/v1`, `/openai/v1`, `/openai`), or undefined for the Azure deployment form. */
  prefix: string | undefined;
  /** The Azure deployment segment (canonically encoded), for the deployment form. */
  deployment: string | undefined;
  /** The query string, with its `?` (or empty). */
  query: string;
}

/** `GET /v1/models…`: passed through to an upstream. */
export interface ModelsRoute {
  kind: 'models';
  wire: Wire;
  path: string;
  query: string;
}

/** A path the router refuses, with why. */
export interface RefusedRoute {
  kind: 'refused';
  wire: Wire;
  status: 404 | 400;
  code: 'not_found' | 'unsupported_route' | 'invalid_deployment';
  message: string;
}

export type RouteMatch = ApiRoute | ModelsRoute | RefusedRoute;

/** The supported routes, as the refusal of another path lists them. */
export const SUPPORTED_ROUTES =
  'POST /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/messages, /v1/messages/count_tokens; ' +
  'Azure OpenAI: POST /openai/deployments/{deployment}/{chat/completions|responses|embeddings}, ' +
  '/openai/v1/{chat/completions|responses|embeddings}, /openai/responses; GET /v1/models';

const BY_PATH: ReadonlyMap<string, { api: InferenceApi; prefix: string }> = new Map([
  ['/v1/chat/completions', { api: CHAT, prefix: '/v1' }],
  ['/openai/v1/chat/completions', { api: CHAT, prefix: '/openai/v1' }],
  ['/v1/responses', { api: RESPONSES, prefix: '/v1' }],
  ['/openai/v1/responses', { api: RESPONSES, prefix: '/openai/v1' }],
  ['/openai/responses', { api: RESPONSES, prefix: '/openai' }],
  ['/v1/embeddings', { api: EMBEDDINGS, prefix: '/v1' }],
  ['/openai/v1/embeddings', { api: EMBEDDINGS, prefix: '/openai/v1' }],
  ['/v1/messages', { api: MESSAGES, prefix: '/v1' }],
  ['/v1/messages/count_tokens', { api: COUNT_TOKENS, prefix: '/v1' }],
]);

const AZURE_APIS: readonly InferenceApi[] = [CHAT, RESPONSES, EMBEDDINGS];
const AZURE_PREFIX = '/openai/deployments/';

/**
 * The error envelope for a request on `path`: Anthropic's for its paths or a request that names an
 * Anthropic API version, OpenAI's otherwise.
 */
export function wireOf(path: string, anthropicVersion: unknown): Wire {
  return path.startsWith('/v1/messages') || typeof anthropicVersion === 'string' ? 'anthropic' : 'openai';
}

/** The canonical form of a raw deployment segment, or undefined when it cannot be one. */
export function canonicalDeployment(raw: string): string | undefined {
  let d: string;
  try {
    d = decodeURIComponent(raw);
  } catch {
    return undefined;
  }
  // A `%` left after one decoding is an encoding in the name: a gateway that decodes twice would
  // read `%2e%2e%2f` as `../` (no deployment name holds a `%`).
  // eslint-disable-next-line no-control-regex
  if (d === '' || d === '.' || d === '..' || /[/\\?#%\u0000-\u001f\u007f]/.test(d) || d.length > 256) return undefined;
  return encodeURIComponent(d);
}

/** Match a request line (method is checked by the pipeline; `GET` only matters for models). */
export function matchRoute(method: string | undefined, url: string, anthropicVersion?: unknown): RouteMatch {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  const wire = wireOf(path, anthropicVersion);
  const direct = BY_PATH.get(path);
  if (direct !== undefined) return { kind: 'api', api: direct.api, prefix: direct.prefix, deployment: undefined, query };
  if (path.startsWith(AZURE_PREFIX)) {
    const rest = path.slice(AZURE_PREFIX.length);
    const slash = rest.indexOf('/');
    const api = slash > 0 ? AZURE_APIS.find((a) => rest.slice(slash) === a.suffix) : undefined;
    if (api !== undefined) {
      const deployment = canonicalDeployment(rest.slice(0, slash));
      if (deployment === undefined)
        return {
          kind: 'refused',
          wire,
          status: 400,
          code: 'invalid_deployment',
          message: `The deployment segment of ${path.slice(0, 200)} is not a deployment name`,
        };
      return { kind: 'api', api, prefix: undefined, deployment, query };
    }
  }
  if (
    method === 'GET' &&
    (path === '/v1/models' || path === '/openai/v1/models' || /^\/v1\/models\/(?!\.\.?$)[A-Za-z0-9._:@-]{1,256}$/.test(path))
  )
    return { kind: 'models', wire, path, query };
  if (/^\/(openai\/)?(v1\/)?responses\/[^/]+(\/(cancel|input_items))?$/.test(path))
    return {
      kind: 'refused',
      wire,
      status: 400,
      code: 'unsupported_route',
      message:
        'kars router does not serve stored or background responses (retrieve, cancel, delete, input_items): their usage is billed outside the request the budget charges; send the whole input to POST /v1/responses',
    };
  if (/^\/(openai\/)?(v1\/)?(messages\/batches|batches)(\/|$)/.test(path))
    return {
      kind: 'refused',
      wire,
      status: 400,
      code: 'unsupported_route',
      message: 'kars router does not serve batch APIs: a batch runs and is billed after the request has ended, outside the budget',
    };
  return {
    kind: 'refused',
    wire,
    status: 404,
    code: 'not_found',
    message: `kars router has no route for ${method ?? 'GET'} ${path.slice(0, 200)}; it serves ${SUPPORTED_ROUTES}`,
  };
}

/** The upstream path of a route (under the upstream's base path), for a deployment candidate. */
export function upstreamPath(route: ApiRoute, basePath: string, deployment: string | undefined): string {
  if (route.prefix !== undefined) return `${basePath}${route.prefix}${route.api.suffix}${route.query}`;
  const seg = deployment === undefined ? (route.deployment ?? '') : encodeURIComponent(deployment);
  return `${basePath}${AZURE_PREFIX}${seg}${route.api.suffix}${route.query}`;
}
