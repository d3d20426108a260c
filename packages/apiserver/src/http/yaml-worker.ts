import { parentPort } from 'node:worker_threads';
import { ApiError } from '@kars/kube-core';
import { parseYamlBounded } from './limits.js';
import type { YamlReply, YamlRequest } from './yaml.js';

// The YAML decoding thread started by ./yaml.ts: decodes one body at a time, within the limits of
// ./limits.ts, and answers with the value or a 400's message.
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
