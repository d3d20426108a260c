import { ApiError } from '@kars/kube-core';
import type { Clock, KubeList, KubeObject, Logger, Status, StatusReason, Timer, WatchEvent } from '@kars/kube-core';
import { Credentials } from './credentials.js';
import { ConnectionLostError } from './errors.js';
import { LineSplitter } from './lines.js';
import { hopTracing, traceHop } from './trace.js';
import { resourcePath, withQuery } from './paths.js';
import type { ResourceRef } from './paths.js';
import { Http2Transport } from './transport.js';
import type { OpenStream } from './transport.js';

export interface ClientOptions {
  /** Kubeconfig file; when unset: KUBECONFIG, ~/.kube/config, then in-cluster. */
  kubeconfig?: string;
  /** HTTP/2 PING period; 0 disables periodic pings. Default 5 s (kube-runtime's DEFAULT_WATCH_CONFIG). */
  pingIntervalMs?: number;
  /** PING answer deadline. Default 3 s. */
  pingTimeoutMs?: number;
  /** Default silent. */
  log?: Logger;
  /** Time source for PINGs, idle deadlines and request deadlines; default the system clock. */
  clock?: Clock;
}

/** Parameters of a list call. */
/**
 * The `fieldValidation` query parameter of a write: what the server does with fields the object's
 * schema does not declare. `Strict` refuses the write (400 `strict decoding error: unknown field
 * "spec.x"`), `Warn` drops them with a warning, `Ignore` drops them silently. Omitted, the server
 * decides (kube-apiserver: Warn; kars apiserver: Ignore). kubectl sends Strict by default.
 */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

/** Options of a create, replace or patch. */
export interface WriteOptions {
  fieldManager?: string;
  fieldValidation?: FieldValidation;
}

export interface ListParams {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  limit?: number | undefined;
  continueToken?: string | undefined;
  resourceVersion?: string | undefined;
}

/** Parameters of a watch call. */
export interface WatchParams {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  resourceVersion: string;
  timeoutSeconds: number;
  allowWatchBookmarks: boolean;
  /** Abort the stream when no byte arrives for this long. */
  idleTimeoutMs: number;
  signal: AbortSignal;
  /** Called once the server has accepted the watch (response headers with 200). */
  onOpen?: () => void;
}

/** Turn a non-2xx response into an ApiError carrying the server's Status. */
function apiError(status: number, body: Buffer, what: string): ApiError {
  let parsed: Partial<Status> | undefined;
  try {
    parsed = JSON.parse(body.toString('utf8')) as Partial<Status>;
  } catch {
    parsed = undefined;
  }
  if (parsed && parsed.kind === 'Status') {
    return new ApiError(
      parsed.code ?? status,
      (parsed.reason ?? 'InternalError') as StatusReason,
      parsed.message ?? `${what} failed with ${status}`,
      parsed.details,
    );
  }
  return new ApiError(
    status,
    status === 404 ? 'NotFound' : 'InternalError',
    `${what} failed with HTTP ${status}: ${body.toString('utf8').slice(0, 200)}`,
  );
}

/**
 * A small Kubernetes REST client over {@link Http2Transport}: CRUD, patch, server-side apply,
 * paginated list, and watch streams with an idle deadline. Errors are ApiErrors with the
 * server's code and reason, or ConnectionLostError when the connection died.
 */
export class KubeClient {
  constructor(readonly transport: Http2Transport) {}

  /** Build a client from a kubeconfig (see {@link ClientOptions}). */
  static fromKubeconfig(opts: ClientOptions = {}): KubeClient {
    const credentials = Credentials.load(opts.kubeconfig);
    return new KubeClient(
      new Http2Transport({
        credentials,
        pingIntervalMs: opts.pingIntervalMs ?? 5_000,
        pingTimeoutMs: opts.pingTimeoutMs ?? 3_000,
        ...(opts.log ? { log: opts.log } : {}),
        ...(opts.clock ? { clock: opts.clock } : {}),
      }),
    );
  }

  private async call<T>(
    method: string,
    path: string,
    what: string,
    body?: unknown,
    contentType = 'application/json',
    signal?: AbortSignal,
  ): Promise<T> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    if (method !== 'GET') traceHop('cli.req', { what });
    const res = await this.transport.request({
      method,
      path,
      ...(payload !== undefined ? { body: payload, headers: { 'content-type': contentType } } : {}),
      ...(signal ? { signal } : {}),
    });
    if (method !== 'GET') traceHop('cli.res', { what, status: res.status });
    if (res.status < 200 || res.status >= 300) throw apiError(res.status, res.body, what);
    return JSON.parse(res.body.toString('utf8')) as T;
  }

  get<T extends KubeObject = KubeObject>(ref: ResourceRef, namespace: string | undefined, name: string, signal?: AbortSignal): Promise<T> {
    return this.call('GET', resourcePath(ref, { namespace, name }), `get ${ref.resource} ${name}`, undefined, undefined, signal);
  }

  /** Get, or undefined when the object does not exist. */
  async getOrUndefined<T extends KubeObject = KubeObject>(
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
  ): Promise<T | undefined> {
    try {
      return await this.get<T>(ref, namespace, name);
    } catch (err) {
      if (err instanceof ApiError && err.code === 404) return undefined;
      throw err;
    }
  }

  list<T extends KubeObject = KubeObject>(ref: ResourceRef, p: ListParams = {}, signal?: AbortSignal): Promise<KubeList<T>> {
    const path = withQuery(resourcePath(ref, { namespace: p.namespace }), {
      labelSelector: p.labelSelector,
      fieldSelector: p.fieldSelector,
      limit: p.limit,
      continue: p.continueToken,
      resourceVersion: p.resourceVersion,
    });
    return this.call('GET', path, `list ${ref.resource}`, undefined, undefined, signal);
  }

  create<T extends KubeObject = KubeObject>(ref: ResourceRef, obj: T, opts: WriteOptions = {}): Promise<T> {
    const path = withQuery(resourcePath(ref, { namespace: obj.metadata.namespace }), {
      fieldManager: opts.fieldManager,
      fieldValidation: opts.fieldValidation,
    });
    return this.call('POST', path, `create ${ref.resource} ${obj.metadata.name ?? ''}`, obj);
  }

  replace<T extends KubeObject = KubeObject>(ref: ResourceRef, obj: T, opts: WriteOptions & { subresource?: 'status' } = {}): Promise<T> {
    const path = withQuery(
      resourcePath(ref, { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '', subresource: opts.subresource }),
      { fieldManager: opts.fieldManager, fieldValidation: opts.fieldValidation },
    );
    return this.call('PUT', path, `replace ${ref.resource} ${obj.metadata.name ?? ''}`, obj);
  }

  patch<T extends KubeObject = KubeObject>(
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    type: 'merge' | 'json' | 'strategic',
    opts: WriteOptions & { subresource?: 'status' } = {},
  ): Promise<T> {
    const ct = {
      merge: 'application/merge-patch+json',
      json: 'application/json-patch+json',
      strategic: 'application/strategic-merge-patch+json',
    }[type];
    const path = withQuery(resourcePath(ref, { namespace, name, subresource: opts.subresource }), {
      fieldManager: opts.fieldManager,
      fieldValidation: opts.fieldValidation,
    });
    return this.call('PATCH', path, `patch ${ref.resource} ${name}`, patch, ct);
  }

  /** Server-side apply of a full or partial object as `fieldManager`. */
  apply<T extends KubeObject = KubeObject>(
    ref: ResourceRef,
    obj: Record<string, unknown> & { metadata: { name?: string; namespace?: string } },
    fieldManager: string,
    opts: { force?: boolean; subresource?: 'status'; fieldValidation?: FieldValidation } = {},
  ): Promise<T> {
    const path = withQuery(
      resourcePath(ref, { namespace: obj.metadata.namespace, name: obj.metadata.name ?? '', subresource: opts.subresource }),
      { fieldManager, force: opts.force ? true : undefined, fieldValidation: opts.fieldValidation },
    );
    return this.call('PATCH', path, `apply ${ref.resource} ${obj.metadata.name ?? ''}`, obj, 'application/apply-patch+yaml');
  }

  delete(
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    opts: { propagationPolicy?: 'Background' | 'Foreground' | 'Orphan'; resourceVersion?: string } = {},
  ): Promise<unknown> {
    const body: Record<string, unknown> = { kind: 'DeleteOptions', apiVersion: 'v1' };
    if (opts.propagationPolicy) body['propagationPolicy'] = opts.propagationPolicy;
    if (opts.resourceVersion) body['preconditions'] = { resourceVersion: opts.resourceVersion };
    return this.call('DELETE', resourcePath(ref, { namespace, name }), `delete ${ref.resource} ${name}`, body);
  }

  /**
   * Open a watch and yield its events. The stream fails with ConnectionLostError("idle") when no
   * byte (event or bookmark) arrives within `idleTimeoutMs`; the connection is then probed with a
   * PING and dropped if it does not answer. It fails with ConnectionLostError("ping") when the
   * connection's liveness check fails, and ends normally when the server ends the watch.
   */
  async *watch<T extends KubeObject = KubeObject>(ref: ResourceRef, p: WatchParams): AsyncGenerator<WatchEvent<T>, void, undefined> {
    for await (const batch of this.watchBatches<T>(ref, p)) for (const ev of batch) yield ev;
  }

  /**
   * {@link watch}, one batch at a time: every event that arrived together (in one read of the
   * stream) comes as one array, in order and never empty, with the same guarantees and failures.
   * A consumer that handles events synchronously pays one promise per batch instead of one per
   * event.
   */
  async *watchBatches<T extends KubeObject = KubeObject>(
    ref: ResourceRef,
    p: WatchParams,
  ): AsyncGenerator<Array<WatchEvent<T>>, void, undefined> {
    const open = await this.openWatch(ref, p);
    const { stream } = open;
    const body = this.watchBody<T>(open, p, ref.resource);
    // Pull reading (stream.read() on 'readable'), so a slow consumer still holds the stream back.
    let wake: (() => void) | undefined;
    let ended = false;
    let failed: Error | undefined;
    const notify = (): void => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const onEnd = (): void => {
      ended = true;
      notify();
    };
    const onError = (err: Error): void => {
      failed ??= err;
      notify();
    };
    const onClose = (): void => {
      if (!ended) failed ??= prematureClose();
      notify();
    };
    const detach = listen(stream, { readable: notify, end: onEnd, error: onError, close: onClose });
    try {
      for (;;) {
        const batch = body.read();
        if (batch.length > 0) {
          yield batch;
          continue;
        }
        if (failed) throw failed;
        if (ended) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } catch (err) {
      throw body.failure(err);
    } finally {
      body.stop();
      detach();
    }
  }

  /**
   * {@link watchBatches} as callbacks: `onBatch` is called synchronously, from the stream's
   * 'data' event, with the events of every chunk as it arrives (in order, never empty), so a synchronous
   * consumer pays no promise and no microtask per batch. Returning `false` stops: the stream is
   * closed and the promise resolves. The promise resolves when the server ends the watch and
   * rejects with exactly what {@link watchBatches} throws (ConnectionLostError "idle" or "ping",
   * the server's ApiError, a malformed event, or whatever `onBatch` throws). The idle deadline,
   * the PING probe and the abort signal work as in {@link watch}.
   */
  async watchEach<T extends KubeObject = KubeObject>(
    ref: ResourceRef,
    p: WatchParams,
    onBatch: (events: Array<WatchEvent<T>>) => boolean | void,
  ): Promise<void> {
    const open = await this.openWatch(ref, p);
    const { stream } = open;
    const body = this.watchBody<T>(open, p, ref.resource);
    await new Promise<void>((resolve, reject) => {
      let done = false;
      let ended = false;
      let detach = (): void => {};
      const finish = (err?: unknown): void => {
        if (done) return;
        done = true;
        body.stop();
        detach();
        if (err === undefined) resolve();
        else reject(body.failure(err));
      };
      // Flowing mode: each chunk comes straight from the stream's push as a 'data' event (no
      // 'readable' round trip through the event loop's tick queue, no read() per chunk).
      const { lines } = body;
      const onData = (chunk: Buffer): void => {
        if (done) return;
        try {
          const batch = lines.push(chunk);
          if (batch.length > 0 && onBatch(batch) === false) finish();
        } catch (err) {
          finish(err);
        }
      };
      const onEnd = (): void => {
        ended = true;
        finish();
      };
      const onClose = (): void => finish(ended ? undefined : prematureClose());
      // ('data' last: it switches the stream to flowing mode.)
      detach = listen(stream, { end: onEnd, error: finish, close: onClose, data: onData });
    });
  }

  /** Open a watch: the request, with the idle deadline on the response headers; a non-200 answer throws its ApiError. */
  private async openWatch(ref: ResourceRef, p: WatchParams): Promise<OpenStream> {
    const path = withQuery(resourcePath(ref, { namespace: p.namespace }), {
      watch: 1,
      resourceVersion: p.resourceVersion,
      timeoutSeconds: p.timeoutSeconds,
      allowWatchBookmarks: p.allowWatchBookmarks ? true : undefined,
      labelSelector: p.labelSelector,
      fieldSelector: p.fieldSelector,
    });
    // The idle deadline also covers the wait for response headers (a dead connection never answers).
    const headerAbort = new AbortController();
    let idleFired = false;
    const headerTimer = this.transport.clock.setTimeout(() => {
      idleFired = true;
      headerAbort.abort();
      void this.transport.probe();
    }, p.idleTimeoutMs);
    let open: OpenStream;
    try {
      open = await this.transport.open({ method: 'GET', path, signal: AbortSignal.any([p.signal, headerAbort.signal]) });
    } catch (err) {
      if (idleFired) throw new ConnectionLostError('idle', `no response to the watch within ${p.idleTimeoutMs} ms`, { cause: err });
      throw err;
    } finally {
      headerTimer.cancel();
    }
    if (open.status !== 200) {
      const { stream } = open;
      try {
        const chunks: Buffer[] = [];
        for await (const c of stream) chunks.push(c as Buffer);
        throw apiError(open.status, Buffer.concat(chunks), `watch ${ref.resource}`);
      } catch (err) {
        const lost = open.lossReason();
        if (lost) throw new ConnectionLostError(lost, err instanceof Error ? err.message : String(err), { cause: err });
        throw err;
      } finally {
        if (!stream.destroyed) stream.destroy();
      }
    }
    return open;
  }

  /**
   * The body of an accepted watch, shared by {@link watchBatches} and {@link watchEach}: arms the
   * idle deadline (one timer per stream, not one per chunk: a read only stamps `lines.lastByteAt`;
   * the timer, when it fires, checks the stamp and re-arms itself for the rest of the deadline if a
   * byte came since), calls `onOpen`, and turns what the stream delivers into events (`lines.push`
   * for a chunk, `read()` for what a paused stream has buffered).
   */
  private watchBody<T extends KubeObject>(
    open: OpenStream,
    p: WatchParams,
    resource: string,
  ): { lines: LineSplitter<T>; read(): Array<WatchEvent<T>>; failure(err: unknown): unknown; stop(): void } {
    const { stream } = open;
    const clock = this.transport.clock;
    const lines = new LineSplitter<T>(clock, hopTracing() ? resource : undefined);
    let idleFired = false;
    let idle: Timer | undefined;
    const armIdle = (ms: number): void => {
      idle = clock.setTimeout(() => {
        const quietMs = clock.now() - lines.lastByteAt;
        if (quietMs < p.idleTimeoutMs) return armIdle(p.idleTimeoutMs - quietMs);
        idleFired = true;
        stream.destroy(new ConnectionLostError('idle', `no bytes on the watch for ${p.idleTimeoutMs} ms`));
        void this.transport.probe(open.connectionId);
      }, ms);
    };
    armIdle(p.idleTimeoutMs);
    p.onOpen?.();
    return {
      lines,
      read: () => {
        let chunk: Buffer | null;
        let batch: Array<WatchEvent<T>> = [];
        while ((chunk = stream.read() as Buffer | null) !== null) {
          const evs = lines.push(chunk);
          if (batch.length === 0) batch = evs;
          else for (let i = 0; i < evs.length; i++) batch.push(evs[i] as WatchEvent<T>);
        }
        return batch;
      },
      failure: (err) => {
        if (idleFired) return new ConnectionLostError('idle', `no bytes on the watch for ${p.idleTimeoutMs} ms`, { cause: err });
        const lost = open.lossReason();
        if (lost) return new ConnectionLostError(lost, err instanceof Error ? err.message : String(err), { cause: err });
        return err;
      },
      stop: () => idle?.cancel(),
    };
  }

  close(): void {
    this.transport.close();
  }
}

/** The events a watch read listens to on its response stream, and their listeners' shapes. */
interface WatchStreamListeners {
  end: () => void;
  error: (err: Error) => void;
  close: () => void;
  readable?: () => void;
  data?: (chunk: Buffer) => void;
}

/**
 * Add the listeners to a watch's response stream, in order; the function returned removes them and
 * destroys the stream (the end of every watch read, however it ends).
 */
function listen(stream: OpenStream['stream'], handlers: WatchStreamListeners): () => void {
  const entries = Object.entries(handlers) as Array<[string, (...args: unknown[]) => void]>;
  for (const [event, fn] of entries) stream.on(event, fn);
  return () => {
    for (const [event, fn] of entries) stream.off(event, fn);
    if (!stream.destroyed) stream.destroy();
  };
}

function prematureClose(): Error {
  return Object.assign(new Error('the watch stream closed before its end'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

export { ConnectionLostError };
