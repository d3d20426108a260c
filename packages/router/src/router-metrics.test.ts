/** The router's own metrics (router-metrics.ts): the series a dashboard can rate from the start. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { RouterMetrics } from './router-metrics.js';

describe('router metrics', () => {
  it('export every known label value of the stale and admission counters at 0 before any event, then count', async () => {
    const registry = new Registry();
    const m = new RouterMetrics(registry, {
      viewAgeMs: () => 1500,
      budget: () => ({ dailyUsed: 3, monthlyUsed: 4, reserved: 5 }) as never,
    });
    const text = await registry.metrics();
    for (const line of [
      'kars_router_stale_requests_total{mode="closed"} 0',
      'kars_router_stale_requests_total{mode="open"} 0',
      'kars_router_admission_refused_total{code="request_too_large"} 0',
      'kars_router_admission_refused_total{code="router_busy"} 0',
      'kars_router_policy_view_age_seconds 1.5',
      'kars_router_budget_tokens{state="reserved"} 5',
    ])
      assert.ok(text.split('\n').includes(line), `${line} in\n${text}`);
    assert.doesNotMatch(text, /kars_router_policy_staleness_seconds/, 'no heartbeat gauge for a directory-fed router');
    m.staleRequest('open');
    m.admissionRefused('router_busy');
    m.decision('inference', 'allow');
    m.decision('inference', 'allow');
    const after = (await registry.metrics()).split('\n');
    assert.ok(after.includes('kars_router_stale_requests_total{mode="open"} 1'));
    assert.ok(after.includes('kars_router_admission_refused_total{code="router_busy"} 1'));
    assert.ok(after.includes('kars_router_requests_total{surface="inference",decision="allow"} 2'));
  });
});
