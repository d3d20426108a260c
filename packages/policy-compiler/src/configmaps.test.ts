import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  egressApprovalFieldManager,
  egressApprovalsConfigMap,
  INFERENCE_POLICY_FIELD_MANAGER,
  TOOL_POLICY_FIELD_MANAGER,
} from './configmaps.js';

describe('field managers', () => {
  it('are one per reconciler, and one per approval for egress', () => {
    assert.equal(INFERENCE_POLICY_FIELD_MANAGER, 'kars-controller/inferencepolicy');
    assert.equal(TOOL_POLICY_FIELD_MANAGER, 'kars-controller/toolpolicy');
    assert.equal(egressApprovalFieldManager('inc-1'), 'kars-controller/egressapproval/inc-1');
  });
});

describe('egressApprovalsConfigMap', () => {
  it('is named kars-<sandbox>-egress-approvals in the given namespace, with sandbox and artifact labels and no annotations', () => {
    const cm = egressApprovalsConfigMap({
      sandbox: 'demo',
      namespace: 'team-a',
      files: [
        { key: 'approval-b.json', body: 'B' },
        { key: 'approval-a.json', body: 'A' },
      ],
    });
    assert.deepEqual(cm, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'kars-demo-egress-approvals',
        namespace: 'team-a',
        labels: {
          'app.kubernetes.io/managed-by': 'kars-controller',
          'kars.azure.com/sandbox': 'demo',
          'kars.azure.com/artifact': 'egress-approvals',
        },
        annotations: {},
      },
      data: { 'approval-a.json': 'A', 'approval-b.json': 'B' },
    });
    assert.deepEqual(Object.keys(cm.data), ['approval-a.json', 'approval-b.json']);
  });
});
