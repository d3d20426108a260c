import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  approvalFileKey,
  approvalOfFileKey,
  EGRESS_APPROVAL_KIND,
  egressApprovalFieldManager,
  egressApprovalsConfigMap,
} from './egress-approval.js';
import { INFERENCE_POLICY_KIND } from './inference-policy.js';
import { TOOL_POLICY_KIND } from './tool-policy.js';

describe('field managers and finalizers (the wire names)', () => {
  it('are one per reconciler, and one per approval for egress', () => {
    assert.equal(INFERENCE_POLICY_KIND.fieldManager, 'kars-controller/inferencepolicy');
    assert.equal(INFERENCE_POLICY_KIND.finalizer, 'kars.azure.com/inferencepolicy-cleanup');
    assert.equal(TOOL_POLICY_KIND.fieldManager, 'kars-controller/toolpolicy');
    assert.equal(TOOL_POLICY_KIND.finalizer, 'kars.azure.com/toolpolicy-cleanup');
    assert.equal(egressApprovalFieldManager('inc-1'), 'kars-controller/egressapproval/inc-1');
    assert.equal(EGRESS_APPROVAL_KIND.finalizer, 'kars.azure.com/egress-approval-cleanup');
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

describe('approval file keys', () => {
  it('name the approval they hold, and nothing else reads as one', () => {
    for (const name of ['a', 'inc-1', 'x.y']) assert.equal(approvalOfFileKey(approvalFileKey(name)), name);
    for (const key of ['approval-.json', 'approval-a.yaml', 'allowlist.json', 'xapproval-a.json', ''])
      assert.equal(approvalOfFileKey(key), undefined);
  });
});
