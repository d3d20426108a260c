/**
 * A JSON scanner that judges a body as Go's `encoding/json` does and words its refusals as Go
 * does (`unexpected end of JSON input`, `invalid character 'x' looking for beginning of value`),
 * so kars can answer with kube-apiserver's messages, which quote those errors. It also reports
 * what `JSON.parse` hides: keys repeated within one object, with the paths sigs.k8s.io/json's
 * strict decoder gives them (`spec.size`, `items[0].name`), and number literals beyond float64.
 *
 * Guarantees: accepts exactly the texts `JSON.parse` accepts (a property test checks it); the
 * error is the one Go's scanner reports at the same byte, including the character it names (a
 * byte, quoted as Go's `quoteChar` quotes it); iterative, so deep nesting costs no stack; nesting
 * deeper than Go's 10,000 levels is refused in Go's words.
 * Caveats: it scans, it does not build the value (callers use `JSON.parse` for that).
 */

/** What a scan of JSON text found. */
export interface GoJsonScan {
  /** Go's syntax error for the text, when it is not valid JSON. */
  error?: string;
  /** Paths of keys repeated within their object, in document order, each once, at most 100 (as sigs.k8s.io/json keeps). */
  duplicates: string[];
  /** The first number literal whose value is beyond float64 (`1e400`), which Go cannot decode. */
  overflow?: string;
}

/** Go's encoding/json nesting limit (maxNestingDepth). */
const MAX_NESTING = 10_000;
const MAX_STRICT_ERRORS = 100;
const END = 'unexpected end of JSON input';
const UTF8 = new TextDecoder();

/** A byte as Go's scanner quotes it in an error (`'x'`, `'\''`, `'\x00'`, `'\u009e'`). */
export function goQuoteByte(c: number): string {
  if (c === 0x27) return `'\\''`;
  if (c === 0x22) return `'"'`;
  if (c === 0x5c) return `'\\\\'`;
  if (c >= 0x20 && c < 0x7f) return `'${String.fromCharCode(c)}'`;
  const named: Record<number, string> = { 7: 'a', 8: 'b', 9: 't', 10: 'n', 11: 'v', 12: 'f', 13: 'r' };
  if (named[c] !== undefined) return `'\\${named[c]}'`;
  if (c < 0x80) return `'\\x${c.toString(16).padStart(2, '0')}'`;
  // string(c) in Go is the rune U+0080..U+00FF; strconv.Quote keeps the printable ones.
  if (c < 0xa1 || c === 0xad) return `'\\u${c.toString(16).padStart(4, '0')}'`;
  return `'${String.fromCharCode(c)}'`;
}

class GoSyntaxError extends Error {}

interface Frame {
  array: boolean;
  /** The id of the frame's path (see {@link Paths}). */
  path: number;
  index: number;
  keys: Set<string> | undefined;
}

/**
 * Strict decoder paths, interned: an id per path (0 is the top level), its parent and its last
 * segment, so that a path is compared by id and spelled out only for a duplicate first found at it.
 * A path's text is as long as its keys together, so building or hashing it at every key, or every
 * repeat of one, would be quadratic in the body (a key of a megabyte above many repeated keys).
 */
class Paths {
  private readonly parent: number[] = [-1];
  private readonly segment: string[] = [''];
  private readonly length: number[] = [0];
  private readonly ids = new Map<string, number>();

  /** The id of the path `segment` (an object key or `[i]`) below the path `parent`. */
  child(parent: number, segment: string, key: boolean): number {
    // sigs.k8s.io/json joins a key to the path before it with a dot (none at the top level).
    const seg = key && parent !== 0 ? `.${segment}` : segment;
    const k = `${parent}:${seg}`;
    let id = this.ids.get(k);
    if (id === undefined) {
      id = this.parent.length;
      this.parent.push(parent);
      this.segment.push(seg);
      this.length.push((this.length[parent] ?? 0) + seg.length);
      this.ids.set(k, id);
    }
    return id;
  }

  /** How long the text of path `id` is. */
  textLength(id: number): number {
    return this.length[id] ?? 0;
  }

  /** The text of path `id` (`spec.ports[0].name`). */
  text(id: number): string {
    const parts: string[] = [];
    for (let p = id; p > 0; p = this.parent[p] ?? 0) parts.push(this.segment[p] ?? '');
    return parts.reverse().join('');
  }
}

/** Scan `bytes` (UTF-8 JSON text) as Go's encoding/json would before decoding it. */
export function scanGoJson(bytes: Uint8Array): GoJsonScan {
  const out: GoJsonScan = { duplicates: [] };
  try {
    scan(bytes, out);
  } catch (err) {
    if (!(err instanceof GoSyntaxError)) throw err;
    out.error = err.message;
    out.duplicates = [];
    delete out.overflow;
  }
  return out;
}

function scan(b: Uint8Array, out: GoJsonScan): void {
  const n = b.length;
  let i = 0;
  const stack: Frame[] = [];
  const paths = new Paths();
  /** Paths already judged for a duplicate, by id and (distinct ids may spell one path: `a.b` and `a`, `b`) by text. */
  const judged = new Set<number>();
  const seen = new Set<string>();
  /** Characters of path text spelled out; bounded so that spelling many long paths stays linear in the body. */
  let spelled = 0;
  const spellBudget = 16 * n + 65_536;
  /** Refuse the byte at `i`; at the end of the text, `unexpected end` unless a space is itself refused here (Go feeds one). */
  const fail = (context: string, spaceRefused = false): never => {
    if (i < n) throw new GoSyntaxError(`invalid character ${goQuoteByte(b[i] ?? 0)} ${context}`);
    throw new GoSyntaxError(spaceRefused ? `invalid character ' ' ${context}` : END);
  };
  const ws = (): void => {
    for (let c = b[i]; c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d; c = b[++i]);
  };
  const digits = (): void => {
    for (let c = b[i]; c !== undefined && c >= 0x30 && c <= 0x39; c = b[++i]);
  };
  const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;
  const str = (): void => {
    i++;
    for (;;) {
      const c = b[i];
      if (c === undefined) fail('in string literal');
      else if (c === 0x22) return void i++;
      else if (c === 0x5c) {
        const e = b[++i];
        if (e === 0x75) {
          i++;
          for (let k = 0; k < 4; k++, i++) if (!isHex(b[i])) fail('in \\u hexadecimal character escape', true);
        } else if (e !== undefined && '"\\/bfnrt'.includes(String.fromCharCode(e))) i++;
        else fail('in string escape code', true);
      } else if (c < 0x20) fail('in string literal');
      else i++;
    }
  };
  const literal = (word: string): void => {
    for (let k = 1; k < word.length; k++) {
      i++;
      if (b[i] !== word.charCodeAt(k)) fail(`in literal ${word} (expecting '${word[k]}')`, true);
    }
    i++;
  };
  const number = (): void => {
    const start = i;
    if (b[i] === 0x2d) {
      i++;
      if (!isDigit(b[i])) fail('in numeric literal', true);
    }
    if (b[i] === 0x30) i++;
    else digits();
    if (b[i] === 0x2e) {
      i++;
      if (!isDigit(b[i])) fail('after decimal point in numeric literal', true);
      digits();
    }
    const exponent = b[i] === 0x65 || b[i] === 0x45;
    if (exponent) {
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!isDigit(b[i])) fail('in exponent of numeric literal', true);
      digits();
    }
    // Only an exponent or some 309 digits can leave float64's range.
    if (out.overflow === undefined && (exponent || i - start > 300)) {
      const text = UTF8.decode(b.subarray(start, i));
      if (!Number.isFinite(Number(text))) out.overflow = text;
    }
  };
  /** The value about to be read: its container's path and its own segment (sigs.k8s.io/json's strict field stack). */
  let parentPath = -1;
  let segment = '';
  let isKey = false;
  let mode: 'value' | 'key' | 'after' = 'value';
  for (;;) {
    if (mode === 'value') {
      ws();
      const c = b[i];
      if (c === 0x7b || c === 0x5b) {
        if (stack.length >= MAX_NESTING) fail('exceeded max depth');
        const array = c === 0x5b;
        const path = parentPath < 0 ? 0 : paths.child(parentPath, segment, isKey);
        stack.push({ array, path, index: 0, keys: array ? undefined : new Set() });
        i++;
        ws();
        if (b[i] === (array ? 0x5d : 0x7d)) {
          i++;
          stack.pop();
          mode = 'after';
        } else if (array) {
          parentPath = path;
          segment = '[0]';
          isKey = false;
        } else mode = 'key';
        continue;
      }
      if (c === 0x22) str();
      else if (c === 0x2d || isDigit(c)) number();
      else if (c === 0x74) literal('true');
      else if (c === 0x66) literal('false');
      else if (c === 0x6e) literal('null');
      else fail('looking for beginning of value');
      mode = 'after';
    } else if (mode === 'key') {
      ws();
      if (b[i] !== 0x22) fail('looking for beginning of object key string');
      const start = i;
      str();
      const f = stack[stack.length - 1] as Frame;
      const raw = b.subarray(start, i);
      const key = raw.includes(0x5c) ? (JSON.parse(UTF8.decode(raw)) as string) : UTF8.decode(raw.subarray(1, -1));
      parentPath = f.path;
      segment = key;
      isKey = true;
      if (!f.keys?.has(key)) f.keys?.add(key);
      else if (out.duplicates.length < MAX_STRICT_ERRORS) {
        const id = paths.child(f.path, key, true);
        if (!judged.has(id) && spelled + paths.textLength(id) <= spellBudget) {
          judged.add(id);
          const text = paths.text(id);
          spelled += text.length;
          if (!seen.has(text)) {
            seen.add(text);
            out.duplicates.push(text);
          }
        }
      }
      ws();
      if (b[i] !== 0x3a) fail('after object key');
      i++;
      mode = 'value';
    } else {
      const f = stack[stack.length - 1];
      ws();
      if (f === undefined) {
        if (i < n) fail('after top-level value');
        return;
      }
      const c = b[i];
      if (c === 0x2c) {
        i++;
        if (f.array) {
          f.index++;
          parentPath = f.path;
          segment = `[${f.index}]`;
          isKey = false;
          mode = 'value';
        } else mode = 'key';
      } else if (c === (f.array ? 0x5d : 0x7d)) {
        i++;
        stack.pop();
      } else fail(f.array ? 'after array element' : 'after object key:value pair');
    }
  }
}

function isHex(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46));
}
