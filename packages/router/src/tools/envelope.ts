/**
 * Spellings of a JSON-RPC message that one MCP server reads differently from another, refused
 * before any decision (issue 20 item 7, ADR 0036).
 *
 * The gateway decides on `method` and `params.name` exactly as spelt. A server whose JSON decoder
 * matches object keys without regard to case (Go's `encoding/json` does, with Unicode folding:
 * `ſ` is `s`, `K` (Kelvin) is `k`) reads `{"params":{"name":"read_file","Name":"delete_file"}}` as
 * a call of whichever key comes last, and a server that folds method names would run
 * `"Tools/Call"`. So a message is refused when:
 * - a key of the message, or of a `tools/call`'s params, is not one of the members but folds to
 *   one (`Method`, `PARAMS`, `paramſ`, `Name`, `ａrguments`);
 * - its method is not `tools/call` but folds to it (case, compatibility forms, spaces or control
 *   characters around or inside).
 *
 * Guarantees: pure; a message the SDKs send (exact member names) is never refused here.
 */
import { isObject } from './jsonrpc.js';
import { fold } from '../json/fold.js';

const MESSAGE_MEMBERS: ReadonlySet<string> = new Set(['jsonrpc', 'id', 'method', 'params', 'result', 'error']);
const CALL_PARAMS: ReadonlySet<string> = new Set(['name', 'arguments', '_meta', 'task']);

function misspelt(obj: Record<string, unknown>, members: ReadonlySet<string>): string | undefined {
  for (const k of Object.keys(obj)) {
    if (members.has(k)) continue;
    const f = fold(k);
    if (members.has(f)) return `key ${JSON.stringify(k)} is another spelling of ${JSON.stringify(f)}`;
  }
  return undefined;
}

/** Why `msg` (one client message) is refused, or undefined when its spelling is unambiguous. */
export function envelopeProblem(msg: unknown): string | undefined {
  if (!isObject(msg)) return undefined;
  const top = misspelt(msg, MESSAGE_MEMBERS);
  if (top !== undefined) return top;
  const method = msg['method'];
  if (typeof method !== 'string') return undefined;
  if (method !== 'tools/call' && fold(method) === 'tools/call')
    return `method ${JSON.stringify(method)} is another spelling of "tools/call"; send it exactly`;
  const params = msg['params'];
  if (method === 'tools/call' && isObject(params)) {
    const p = misspelt(params, CALL_PARAMS);
    if (p !== undefined) return `tools/call params: ${p}`;
  }
  return undefined;
}
