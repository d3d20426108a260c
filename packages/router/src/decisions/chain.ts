/**
 * The decision log's hash chain, as pure functions: the hash of a line, and the check of a chain
 * of files (`kars audit verify`). A line's hash is `sha256:` + the hex SHA-256 of its bytes as
 * written (UTF-8, without the newline): the writer's `JSON.stringify` with a fixed field order is
 * the canonical form, so a verifier never re-serialises anything. Every line carries `seq` (one
 * more than the line before it) and `prev` (the hash of the line before it, across files: a new
 * file's first line names the previous file's last). The very first line of a log has `prev: null`.
 *
 * Guarantees: {@link verifyChain} never throws on any input; it names the first line that breaks
 * the chain and says how (altered, removed, reordered, truncated, malformed).
 *
 * Caveats: the chain is tamper-evident, not tamper-proof. Whoever can rewrite the whole log from
 * some line on can rebuild a valid chain; a verifier catches that only against a head hash kept
 * elsewhere (`--head`, the admin listener's `/decisions/head`). Editing the very last line is
 * likewise seen only against such a head. ADR 0040.
 */
import { createHash } from 'node:crypto';

/** The hash of one log line (without its newline). */
export function lineHash(line: string): string {
  return `sha256:${createHash('sha256').update(line, 'utf8').digest('hex')}`;
}

/** One file of a chain, in chain order. */
export interface ChainFile {
  name: string;
  text: string;
}

/** How a chain breaks. */
export type ChainProblemKind = 'altered' | 'removed' | 'reordered' | 'truncated' | 'malformed' | 'head';

/** The first place a chain breaks. */
export interface ChainProblem {
  kind: ChainProblemKind;
  file: string;
  /** 1-based line in `file`. */
  line: number;
  /** The `seq` of the record named, when it could be read. */
  seq: number | undefined;
  message: string;
}

/** What a clean chain holds. */
export interface ChainSummary {
  files: number;
  records: number;
  firstSeq: number | undefined;
  lastSeq: number | undefined;
  /** The hash of the last line: what a later check of the same log can be held to (`--head`). */
  head: string | null;
  /** Whether the first line is the log's genesis (`prev: null`); otherwise older files were rotated away. */
  fromGenesis: boolean;
  /** Gap records in the chain: decisions the router dropped, and said so (ADR 0040). */
  gaps: Array<{ seq: number; dropped: number }>;
}

export type ChainVerdict = ({ ok: true } & ChainSummary) | ({ ok: false; problem: ChainProblem } & ChainSummary);

interface Parsed {
  file: string;
  line: number;
  text: string;
  seq: number;
  prev: string | null;
  type: unknown;
  dropped: unknown;
}

/**
 * Check a chain: `files` in chain order (oldest first). `head`, when given, is the hash the last
 * line must have (catches an edited or removed last line, or a tail cut at a line boundary).
 */
export function verifyChain(files: readonly ChainFile[], head?: string): ChainVerdict {
  const summary: ChainSummary = {
    files: files.length,
    records: 0,
    firstSeq: undefined,
    lastSeq: undefined,
    head: null,
    fromGenesis: false,
    gaps: [],
  };
  const fail = (p: ChainProblem): ChainVerdict => ({ ok: false, problem: p, ...summary });
  // Parse every line first (so a break can look ahead to tell a removal from a reordering).
  const lines: Parsed[] = [];
  for (const f of files) {
    // A file the log named says the seq of its first line: removing lines at its head shows there.
    const named = /decisions-(\d{12})\.jsonl$/.exec(f.name);
    const firstLine = f.text.slice(0, f.text.indexOf('\n') >= 0 ? f.text.indexOf('\n') : f.text.length);
    if (named !== null && firstLine !== '') {
      const m = /^\{"seq":(\d+),/.exec(firstLine);
      const want = Number(named[1]);
      if (m !== null && Number(m[1]) !== want)
        return fail({
          kind: 'removed',
          file: f.name,
          line: 1,
          seq: Number(m[1]),
          message: `line 1 of ${f.name} has seq ${m[1]}, but the file was started at seq ${want}: the records before it in this file were removed`,
        });
    }
    const parts = f.text.split('\n');
    const last = parts.pop() ?? '';
    if (last !== '') {
      // The writer ends every line with a newline: a file that does not end with one was cut.
      parts.push(last);
    }
    for (let i = 0; i < parts.length; i++) {
      const text = parts[i] ?? '';
      const cutShort = last !== '' && i === parts.length - 1;
      let v: unknown;
      try {
        v = JSON.parse(text);
      } catch {
        v = undefined;
      }
      const o = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
      const seq = o?.['seq'];
      const prev = o?.['prev'];
      if (cutShort)
        return fail({
          kind: 'truncated',
          file: f.name,
          line: i + 1,
          seq: typeof seq === 'number' ? seq : undefined,
          message: `line ${i + 1} of ${f.name} is cut short (no newline at the end of the file): the file was truncated`,
        });
      if (o === undefined || !Number.isSafeInteger(seq) || (prev !== null && typeof prev !== 'string'))
        return fail({
          kind: 'malformed',
          file: f.name,
          line: i + 1,
          seq: typeof seq === 'number' ? seq : undefined,
          message: `line ${i + 1} of ${f.name} is not a decision-log record (JSON with an integer seq and a prev hash)`,
        });
      lines.push({
        file: f.name,
        line: i + 1,
        text,
        seq: seq as number,
        prev: prev as string | null,
        type: o['type'],
        dropped: o['dropped'],
      });
    }
  }
  let prevHash: string | undefined;
  let prevLine: Parsed | undefined;
  for (let k = 0; k < lines.length; k++) {
    const l = lines[k] as Parsed;
    const hash = lineHash(l.text);
    if (prevLine === undefined) {
      summary.firstSeq = l.seq;
      summary.fromGenesis = l.prev === null;
    } else {
      const expected = prevLine.seq + 1;
      const at = `line ${l.line} of ${l.file} (seq ${l.seq})`;
      if (l.seq > expected) {
        const later = lines.slice(k + 1).some((m) => m.seq === expected);
        return fail(
          later
            ? {
                kind: 'reordered',
                file: l.file,
                line: l.line,
                seq: l.seq,
                message: `${at} comes before seq ${expected}, which appears later: records were reordered`,
              }
            : {
                kind: 'removed',
                file: l.file,
                line: l.line,
                seq: l.seq,
                message: `${at} follows seq ${prevLine.seq}: ${l.seq - expected === 1 ? `record ${expected} was` : `records ${expected}..${l.seq - 1} were`} removed`,
              },
        );
      }
      if (l.seq < expected)
        return fail({
          kind: 'reordered',
          file: l.file,
          line: l.line,
          seq: l.seq,
          message: `${at} comes after seq ${prevLine.seq}: records were reordered`,
        });
      if (l.prev !== prevHash)
        return fail({
          kind: 'altered',
          file: prevLine.file,
          line: prevLine.line,
          seq: prevLine.seq,
          message: `line ${prevLine.line} of ${prevLine.file} (seq ${prevLine.seq}) was altered: its hash is not the prev of the record after it`,
        });
    }
    if (l.type === 'gap') summary.gaps.push({ seq: l.seq, dropped: typeof l.dropped === 'number' ? l.dropped : NaN });
    summary.records++;
    summary.lastSeq = l.seq;
    summary.head = hash;
    prevHash = hash;
    prevLine = l;
  }
  if (head !== undefined && summary.head !== head) {
    const l = prevLine;
    return fail({
      kind: 'head',
      file: l?.file ?? '',
      line: l?.line ?? 0,
      seq: l?.seq,
      message:
        l === undefined
          ? `the chain is empty, but its head should be ${head}`
          : `the last record (line ${l.line} of ${l.file}, seq ${l.seq}) hashes to ${summary.head}, not the expected head ${head}: it was altered, or records after it were removed`,
    });
  }
  return { ok: true, ...summary };
}
