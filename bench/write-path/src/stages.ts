/** Each stage of one write alone, in a tight loop. */
import { performance } from 'node:perf_hooks';
import type { KubeObject } from '@kars/kube-core';
import {
  admitObject,
  bumpGeneration,
  coerceBody,
  fieldOptions,
  finalizeForCreate,
  nowRfc3339,
  sameIgnoringManagedTimes,
} from '@kars/apiserver/internals';
import type { Target } from '@kars/apiserver/internals';
import { trackUpdate } from '@kars/kube-patch';
import { cmBody, med } from './common.js';

/** µs per call of `fn`, after a warm-up, median of 5 runs of `n` calls. */
function perCall(n: number, fn: (i: number) => unknown): number {
  for (let i = 0; i < Math.min(n, 2000); i++) fn(i);
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn(i);
    runs.push(((performance.now() - t0) * 1000) / n);
  }
  return med(runs);
}

/** Rows `[stage, µs per call]` for the ConfigMap resource `ri`. */
export function stages(ri: Target['ri']): Array<[string, number]> {
  const tc: Target = { ri, version: 'v1', ns: 'gc', name: 'cm-1' };
  const raw = Buffer.from(JSON.stringify(cmBody(1)));
  const created = ((): KubeObject => {
    const o = coerceBody(tc, cmBody(1), true);
    const a = admitObject(ri, 'v1', 'cm-1', o, undefined, 'Warn');
    const f = finalizeForCreate(tc, a.obj);
    const tr = trackUpdate(undefined, f, 'bench', 'v1', nowRfc3339(), undefined, fieldOptions(tc));
    tr.metadata.resourceVersion = '42';
    return tr;
  })();
  const storedText = JSON.stringify(created);
  const upd = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { ...created.metadata },
    data: { index: '1', update: '1', payload: 'y'.repeat(64) },
  };
  const N = 20000;
  const rows: Array<[string, number]> = [
    ['JSON.parse of the request body (Buffer → object)', perCall(N, () => JSON.parse(raw.toString('utf8')))],
    ['coerceBody (create)', perCall(N, () => coerceBody(tc, cmBody(1), true))],
    ['admitObject (create)', perCall(N, () => admitObject(ri, 'v1', 'cm-1', coerceBody(tc, cmBody(1), true), undefined, 'Warn'))],
    ['finalizeForCreate', perCall(N, () => finalizeForCreate(tc, coerceBody(tc, cmBody(1), true)))],
    [
      'trackUpdate (create)',
      perCall(N, () => trackUpdate(undefined, coerceBody(tc, cmBody(1), true), 'bench', 'v1', nowRfc3339(), undefined, {})),
    ],
    ['JSON.parse of the stored object', perCall(N, () => JSON.parse(storedText))],
    ['JSON.stringify of the stored object', perCall(N, () => JSON.stringify(created))],
    [
      'trackUpdate (update, same manager; includes a JSON.parse of the stored object)',
      perCall(N, () => {
        const old = JSON.parse(storedText) as KubeObject;
        return trackUpdate(old, coerceBody(tc, upd, false), 'bench', 'v1', nowRfc3339(), undefined, {});
      }),
    ],
    [
      'bumpGeneration + sameIgnoringManagedTimes (update; includes the same JSON.parse)',
      perCall(N, () => {
        const old = JSON.parse(storedText) as KubeObject;
        const o = coerceBody(tc, upd, false);
        bumpGeneration(ri, old, o);
        return sameIgnoringManagedTimes(old, o);
      }),
    ],
  ];
  return rows;
}
