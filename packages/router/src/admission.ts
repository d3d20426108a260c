/**
 * Admission for agent requests (issue 9 item 6): bounds on the request bodies the router holds at
 * once and on the requests it serves at once, decided from the headers before a body byte is read.
 *
 * - A declared `content-length` above `maxRequestBodyBytes` → **413** `request_too_large` at once,
 *   without reading the body (the connection is closed).
 * - Each admitted request holds its declared length, or `maxRequestBodyBytes` when the length is
 *   not declared (chunked), until its response closes. A request with neither `content-length` nor
 *   `transfer-encoding` has no body (RFC 9112 §6.3) and holds none: an MCP GET stream, which may
 *   stay open for a whole session, must not hold 10 MiB of the body budget while it lasts. When that would push the bytes held above
 *   `maxInflightBodyBytes` → **503** `router_busy` (`Retry-After: 1`).
 * - More than `maxConcurrent` requests in flight → **503** `router_busy` (`Retry-After: 1`).
 *
 * Guarantees: pure bookkeeping, no timers; every admitted request releases exactly once (on the
 * response's `close`), so nothing leaks when clients vanish.
 *
 * Memory: the router's body memory is bounded by about `maxInflightBodyBytes` times the copies a
 * request makes while it is decided (read buffer, string, parse, re-serialisation: about 4–5×).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_REQUEST_BODY_BYTES } from './inference/pipeline.js';

/** Default per-request body limit: the inference route's (10 MiB), so the gate never admits what the route refuses. */
export const DEFAULT_MAX_REQUEST_BODY_BYTES = MAX_REQUEST_BODY_BYTES;
/** Default bound on body bytes held by requests in flight (32 MiB). */
export const DEFAULT_MAX_INFLIGHT_BODY_BYTES = 32 * 1024 * 1024;
/** Default bound on agent requests in flight. */
export const DEFAULT_MAX_CONCURRENT_REQUESTS = 256;

export interface AdmissionLimits {
  maxRequestBodyBytes: number;
  maxInflightBodyBytes: number;
  maxConcurrent: number;
}

export type Admission =
  { ok: true; release: () => void } | { ok: false; status: 413 | 503; code: 'request_too_large' | 'router_busy'; message: string };

/** Counts requests and body bytes in flight against {@link AdmissionLimits}. */
export class AdmissionGate {
  #active = 0;
  #bytes = 0;
  readonly limits: AdmissionLimits;

  constructor(limits: Partial<AdmissionLimits> = {}) {
    this.limits = {
      maxRequestBodyBytes: limits.maxRequestBodyBytes ?? DEFAULT_MAX_REQUEST_BODY_BYTES,
      maxInflightBodyBytes: limits.maxInflightBodyBytes ?? DEFAULT_MAX_INFLIGHT_BODY_BYTES,
      maxConcurrent: limits.maxConcurrent ?? DEFAULT_MAX_CONCURRENT_REQUESTS,
    };
    if (this.limits.maxInflightBodyBytes < this.limits.maxRequestBodyBytes) {
      throw new RangeError(
        `the in-flight body cap (${this.limits.maxInflightBodyBytes} bytes) must be at least the per-request limit (${this.limits.maxRequestBodyBytes} bytes), or no large request could ever be admitted`,
      );
    }
  }

  /** Requests and body bytes currently admitted. */
  get inFlight(): { requests: number; bodyBytes: number } {
    return { requests: this.#active, bodyBytes: this.#bytes };
  }

  /** Decide from the request's headers; on success the caller must call `release` once (see {@link admitRequest}). */
  admit(declaredLength: string | undefined): Admission {
    const { maxRequestBodyBytes, maxInflightBodyBytes, maxConcurrent } = this.limits;
    let hold = maxRequestBodyBytes;
    if (declaredLength !== undefined) {
      const n = /^\d{1,16}$/.test(declaredLength) ? Number(declaredLength) : NaN;
      if (Number.isNaN(n) || n > maxRequestBodyBytes)
        return {
          ok: false,
          status: 413,
          code: 'request_too_large',
          message: `Request body exceeds ${maxRequestBodyBytes} bytes; send a smaller request`,
        };
      hold = n;
    }
    if (this.#active >= maxConcurrent)
      return {
        ok: false,
        status: 503,
        code: 'router_busy',
        message: `the router is serving its maximum of ${maxConcurrent} requests; retry shortly`,
      };
    if (this.#bytes + hold > maxInflightBodyBytes)
      return {
        ok: false,
        status: 503,
        code: 'router_busy',
        message: `the router holds its maximum of ${maxInflightBodyBytes} request body bytes in flight; retry shortly`,
      };
    this.#active++;
    this.#bytes += hold;
    let done = false;
    return {
      ok: true,
      release: () => {
        if (done) return;
        done = true;
        this.#active--;
        this.#bytes -= hold;
      },
    };
  }
}

/**
 * Admit `req` or answer it: on refusal the answer (OpenAI-shaped error, `connection: close`) is
 * sent without reading the body and false is returned. On success the admission is released when
 * `res` closes.
 */
export function admitRequest(gate: AdmissionGate, req: IncomingMessage, res: ServerResponse): boolean {
  // Neither header: the request has no body (RFC 9112 §6.3), so it holds no body bytes.
  const declared = req.headers['content-length'] ?? (req.headers['transfer-encoding'] === undefined ? '0' : undefined);
  const a = gate.admit(declared);
  if (a.ok) {
    res.once('close', a.release);
    return true;
  }
  const text = JSON.stringify({
    error: { message: a.message, type: a.status === 413 ? 'invalid_request_error' : 'router_busy', code: a.code },
  });
  res.shouldKeepAlive = false;
  res.writeHead(a.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    connection: 'close',
    ...(a.status === 503 ? { 'retry-after': '1' } : {}),
  });
  res.end(text);
  return false;
}
