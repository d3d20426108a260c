import { readlinkSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { ApiError } from '@kars/kube-core';
import { parseYamlBounded } from './limits.js';
import type { YamlReply, YamlRequest, YamlThreadMessage } from './yaml.js';

// The YAML decoding thread started by ./yaml.ts: decodes one body at a time, within the limits of
// ./limits.ts, and answers with the value or a 400's message. First it tells its Linux thread id
// (/proc/thread-self is PID/task/TID), so that ./yaml.ts can limit the CPU time it spends.
let tid = 0;
try {
  tid = Number(readlinkSync('/proc/thread-self').split('/').pop()) || 0;
} catch {
  // Not Linux: ./yaml.ts falls back to a wall-time limit.
}
parentPort?.postMessage({ tid } satisfies YamlThreadMessage);
parentPort?.on('message', (m: YamlRequest) => {
  let reply: YamlReply;
  try {
    reply = { id: m.id, ok: true, value: parseYamlBounded(m.text) };
  } catch (err) {
    reply = {
      id: m.id,
      ok: false,
      status: err instanceof ApiError ? err.code : 400,
      message: err instanceof Error ? err.message : String(err),
    };
  }
  parentPort?.postMessage(reply);
});
