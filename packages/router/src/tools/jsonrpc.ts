/**
 * The JSON-RPC 2.0 shapes the MCP gateway reads and writes, and small helpers to build them.
 */
import { isObject } from '@kars/kube-core';

export type JsonRpcId = string | number | null;

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** A request (with `id`) or a notification (without); `params` as sent. */
export interface JsonRpcRequest {
  jsonrpc: '2.0';
  method: string;
  id?: JsonRpcId;
  params?: unknown;
}

export type JsonRpcResponse =
  { jsonrpc: '2.0'; id: JsonRpcId; result: unknown } | { jsonrpc: '2.0'; id: JsonRpcId; error: JsonRpcErrorObject };

/** Standard JSON-RPC codes used here. */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
export const JSONRPC_METHOD_NOT_FOUND = -32601;
export const JSONRPC_INVALID_PARAMS = -32602;

export function rpcError(id: JsonRpcId, code: number, message: string, data?: unknown): JsonRpcResponse {
  return { jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } };
}

/** A plain JSON object: kube-core's one check, re-exported for the gateway's modules. */
export { isObject };

/** The `id` of a message if it is a valid JSON-RPC id, else null. */
export function idOf(msg: unknown): JsonRpcId {
  if (!isObject(msg)) return null;
  const id = msg['id'];
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** Classify one incoming message. */
export type Classified =
  | { kind: 'request'; msg: JsonRpcRequest; id: JsonRpcId }
  | { kind: 'notification'; msg: JsonRpcRequest }
  | { kind: 'response' }
  | { kind: 'invalid'; id: JsonRpcId; why: string };

export function classify(msg: unknown): Classified {
  if (!isObject(msg)) return { kind: 'invalid', id: null, why: 'a JSON-RPC message must be an object' };
  if (msg['jsonrpc'] !== '2.0') return { kind: 'invalid', id: idOf(msg), why: 'jsonrpc must be "2.0"' };
  const method = msg['method'];
  if (method === undefined) {
    if ('id' in msg && ('result' in msg || 'error' in msg)) return { kind: 'response' };
    return { kind: 'invalid', id: idOf(msg), why: 'a message needs a method (request) or a result/error (response)' };
  }
  if (typeof method !== 'string') return { kind: 'invalid', id: idOf(msg), why: 'method must be a string' };
  if (!('id' in msg)) return { kind: 'notification', msg: msg as unknown as JsonRpcRequest };
  const id = msg['id'];
  if (typeof id !== 'string' && typeof id !== 'number' && id !== null)
    return { kind: 'invalid', id: null, why: 'id must be a string, a number or null' };
  return { kind: 'request', msg: msg as unknown as JsonRpcRequest, id };
}
