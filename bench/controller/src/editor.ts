// The edited policy (edit/edited, referenced by BENCH_EDIT_SANDBOXES sandboxes) and the sequential
// edits every edit phase makes of it.

import { Resources } from '@kars/kube-client';
import type { Change } from '@kars/kube-runtime';
import { INFERENCE_POLICY_KIND } from '@kars/policy-compiler';
import { INFERENCE_POLICY, KARS_SANDBOX } from '@kars/policy-api';
import { errMsg, sleep } from '../../lib/dist/index.js';
import type { Config } from './config.js';
import type { ControllerProcess } from './controller-process.js';
import { dailyOf, inferencePolicy, isReadyFor, sandbox } from './objects.js';
import type { ConfigMapObject, PolicyObject } from './objects.js';
import type { EditRun } from './run.js';
import { remove } from './util.js';
import type { World } from './world.js';

const EDIT_NS = 'edit';
const EDIT_POLICY = 'edited';

/** The edited policy and how to edit it. */
export interface Editor {
  /** `edit/edited`. */
  editKey: string;
  /** The key of its compiled ConfigMap. */
  editCmKey: string;
  /** The dailyTokens of the last edit (the policy's current value). */
  readonly value: number;
  /**
   * `n` sequential edits of edit/edited: merge-patch spec.tokenBudget.dailyTokens to a new value,
   * time until the ConfigMap holds it and until the policy is Ready for that generation.
   */
  runEdits(n: number, label: string, ctl: ControllerProcess): Promise<EditRun>;
}

/** Create namespace `edit`, the policy `edited` and its sandboxes (each with a simulated router). */
export async function createEditor(w: World, cfg: Config): Promise<Editor> {
  const { api, cmSubs, ipSubs, router, waitFor } = w;
  const editKey = `${EDIT_NS}/${EDIT_POLICY}`;
  const editCmKey = `${EDIT_NS}/${INFERENCE_POLICY_KIND.configMap.name(EDIT_POLICY)}`;
  await api.create(Resources.namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: EDIT_NS } });
  let editValue = 1_000_000;
  await api.create(INFERENCE_POLICY, inferencePolicy(EDIT_NS, EDIT_POLICY, '', editValue));
  for (let k = 0; k < cfg.editSandboxes; k++) {
    await api.create(KARS_SANDBOX, sandbox(EDIT_NS, `sb-${k}`, EDIT_POLICY));
    await router.add(EDIT_NS, `sb-${k}`, EDIT_POLICY);
  }

  const runEdits = async (n: number, label: string, ctl: ControllerProcess): Promise<EditRun> => {
    const res: EditRun = { toCm: [], toReady: [], lastCompileMs: [], lastMs: [], patchMs: [], timeouts: 0, errors: [] };
    for (let i = 0; i < n; i++) {
      if (ctl.died) throw new Error(ctl.died);
      const value = ++editValue;
      const e: { value: number; t0: number; cmAt?: number; readyAt?: number; status?: PolicyObject['status'] } = { value, t0: 0 };
      const onCm = (c: Change<ConfigMapObject>): void => {
        if (
          e.cmAt === undefined &&
          c.type === 'apply' &&
          `${c.object.metadata.namespace}/${c.object.metadata.name}` === editCmKey &&
          dailyOf(c.object) === value
        )
          e.cmAt = performance.now();
      };
      const onIp = (c: Change<PolicyObject>): void => {
        if (e.readyAt !== undefined || c.type !== 'apply' || `${c.object.metadata.namespace}/${c.object.metadata.name}` !== editKey) return;
        if (c.object.spec?.tokenBudget?.dailyTokens === value && isReadyFor(c.object)) {
          e.readyAt = performance.now();
          if (c.object.status !== undefined) e.status = c.object.status;
        }
      };
      cmSubs.unshift(onCm);
      ipSubs.unshift(onIp);
      try {
        e.t0 = performance.now();
        await api.patch(INFERENCE_POLICY, EDIT_NS, EDIT_POLICY, { spec: { tokenBudget: { dailyTokens: value } } }, 'merge');
        res.patchMs.push(performance.now() - e.t0);
        await waitFor(
          () => e.cmAt !== undefined && e.readyAt !== undefined,
          cfg.editTimeoutMs,
          `${label} edit ${i} (dailyTokens=${value})`,
        );
        res.toCm.push((e.cmAt ?? NaN) - e.t0);
        res.toReady.push((e.readyAt ?? NaN) - e.t0);
        if (typeof e.status?.propagation?.lastCompileMs === 'number') res.lastCompileMs.push(e.status.propagation.lastCompileMs);
        if (typeof e.status?.propagation?.lastMs === 'number') res.lastMs.push(e.status.propagation.lastMs);
      } catch (err) {
        res.timeouts++;
        res.errors.push(errMsg(err));
        if (e.cmAt !== undefined) res.toCm.push(e.cmAt - e.t0);
      } finally {
        remove(cmSubs, onCm);
        remove(ipSubs, onIp);
      }
      if (cfg.editGapMs > 0) await sleep(cfg.editGapMs);
    }
    return res;
  };

  return {
    editKey,
    editCmKey,
    get value() {
      return editValue;
    },
    runEdits,
  };
}
