/**
 * `GET /decisions` on the admin listener: the decision log as NDJSON, the lines exactly as on disk
 * (so a reader can check the chain of what it received), oldest first.
 *
 * Query: `since` (epoch ms or an RFC 3339 time; lines older are skipped), `kind`
 * (`inference|tool|egress`), `decision` (`allow|deny|cap`), `follow=1` (keep the response open and
 * send each new line once written). `start` and `gap` records always pass the filters, so a gap is
 * never hidden from a reader.
 *
 * Guarantees: with `follow`, no line is sent twice or skipped between the files and the live feed
 * (the feed is subscribed before the files are read, and lines are de-duplicated by `seq`); a
 * follower that does not read is cut off once 8 MiB are buffered for it (it reconnects with `since`).
 */
import { createReadStream } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { createInterface } from 'node:readline';
import type { DecisionLog } from './log.js';

/** A parsed `/decisions` query. */
export interface DecisionQuery {
  sinceMs: number | undefined;
  kind: string | undefined;
  decision: string | undefined;
  follow: boolean;
}

const KINDS = new Set(['inference', 'tool', 'egress']);
const VERDICTS = new Set(['allow', 'deny', 'cap']);
const MAX_FOLLOWER_BUFFER = 8 * 1024 * 1024;

/** Parse the query of `/decisions`; a string is the reason it is refused (400). */
export function parseDecisionQuery(q: URLSearchParams): DecisionQuery | string {
  const since = q.get('since');
  let sinceMs: number | undefined;
  if (since !== null && since !== '') {
    sinceMs = /^\d+$/.test(since) ? Number(since) : Date.parse(since);
    if (!Number.isFinite(sinceMs)) return `since must be epoch milliseconds or an RFC 3339 time, got ${JSON.stringify(since.slice(0, 64))}`;
  }
  const kind = q.get('kind') ?? undefined;
  if (kind !== undefined && !KINDS.has(kind)) return 'kind must be inference, tool or egress';
  const decision = q.get('decision') ?? undefined;
  if (decision !== undefined && !VERDICTS.has(decision)) return 'decision must be allow, deny or cap';
  const f = q.get('follow');
  return { sinceMs, kind, decision, follow: f === '1' || f === 'true' };
}

/** Whether a line passes the query's filters. */
export function lineMatches(line: string, q: DecisionQuery): boolean {
  if (q.sinceMs === undefined && q.kind === undefined && q.decision === undefined) return true;
  let o: { type?: unknown; time?: unknown; kind?: unknown; decision?: unknown };
  try {
    o = JSON.parse(line) as typeof o;
  } catch {
    return false;
  }
  if (q.sinceMs !== undefined && (typeof o.time !== 'string' || Date.parse(o.time) < q.sinceMs)) return false;
  if (o.type !== 'decision') return true;
  if (q.kind !== undefined && o.kind !== q.kind) return false;
  if (q.decision !== undefined && o.decision !== q.decision) return false;
  return true;
}

function seqOf(line: string): number {
  // `{"seq":N,` is how the log writes every line.
  const m = /^\{"seq":(\d+),/.exec(line);
  return m === null ? -1 : Number(m[1]);
}

/** Answer `/decisions` from `log`; resolves when the response is over (or, following, when `signal` aborts or the client goes). */
export async function serveDecisions(log: DecisionLog, q: DecisionQuery, res: ServerResponse, signal: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
  let sent = -1;
  const early: Array<{ line: string; seq: number }> = [];
  let live = false;
  const send = (line: string, seq: number): void => {
    if (seq <= sent) return;
    sent = seq;
    if (lineMatches(line, q)) res.write(`${line}\n`);
  };
  const unsubscribe = q.follow
    ? log.subscribe((line, seq) => {
        if (!live) early.push({ line, seq });
        else {
          send(line, seq);
          if (res.writableLength > MAX_FOLLOWER_BUFFER) res.destroy();
        }
      })
    : undefined;
  try {
    for (const path of log.files()) {
      if (res.destroyed) return;
      const rl = createInterface({ input: createReadStream(path, { encoding: 'utf8' }).on('error', () => undefined), crlfDelay: Infinity });
      try {
        for await (const line of rl) {
          if (line === '') continue;
          send(line, seqOf(line));
          if (res.writableLength > MAX_FOLLOWER_BUFFER) await new Promise((r) => res.once('drain', r));
        }
      } catch {
        // a file rotated away while read
      }
    }
    if (!q.follow) {
      res.end();
      return;
    }
    for (const e of early) send(e.line, e.seq);
    early.length = 0;
    live = true;
    await new Promise<void>((resolve) => {
      if (signal.aborted || res.destroyed) return resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
      res.once('close', () => resolve());
    });
    if (!res.destroyed) res.end();
  } finally {
    unsubscribe?.();
  }
}
