import { ApiError } from '@kars/kube-core';
import type { Registry } from '../registry/registry.js';
import { OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_RESPONSE, OpenApiV2 } from '../openapi/v2.js';
import { OpenApiV3 } from '../openapi/v3.js';
import type { Req, Res } from './compat.js';
import { sendJson } from './compat.js';

/** The OpenAPI documents of one server (cached between requests; rebuilt when resources change). */
export class OpenApiDocuments {
  readonly v2: OpenApiV2;
  readonly v3: OpenApiV3;
  constructor(reg: Registry) {
    this.v2 = new OpenApiV2(reg);
    this.v3 = new OpenApiV3(reg);
  }
}

/** Whether an Accept header asks for the gnostic protobuf form ahead of (or instead of) JSON. */
function wantsProtobuf(accept: string | string[] | undefined): boolean {
  const h = (Array.isArray(accept) ? accept.join(',') : (accept ?? '')).toLowerCase();
  const ranges = h.split(',').map((r) => (r.split(';')[0] ?? '').trim());
  const pb = ranges.findIndex((r) => r === OPENAPI_V2_PROTOBUF || r === OPENAPI_V2_PROTOBUF_RESPONSE);
  if (pb < 0) return false;
  const json = ranges.findIndex((r) => r === 'application/json' || r === '*/*' || r === 'application/*');
  return json < 0 || pb < json;
}

/** Answer /openapi/v2 (JSON or gnostic protobuf) and /openapi/v3[/<gv>]; 404 for anything else. */
export function serveOpenApi(docs: OpenApiDocuments, req: Req, res: Res, path: string): void {
  if (path === '/openapi/v2' || path === '/openapi/v2/') {
    const cur = docs.v2.current();
    if (req.headers['if-none-match'] === cur.etag) {
      res.writeHead(304, { etag: cur.etag });
      res.end();
      return;
    }
    if (wantsProtobuf(req.headers['accept'])) {
      res.writeHead(200, {
        'content-type': OPENAPI_V2_PROTOBUF_RESPONSE,
        etag: cur.etag,
        'cache-control': 'no-cache, private',
        'content-length': String(cur.proto.length),
      });
      res.end(cur.proto);
      return;
    }
    return sendJson(res, 200, cur.json, { etag: cur.etag });
  }
  const text = path.startsWith('/openapi/v3') ? docs.v3.serve(path) : undefined;
  if (text === undefined) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
  sendJson(res, 200, text);
}
