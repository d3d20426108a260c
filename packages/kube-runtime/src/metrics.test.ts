import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { FakeClock } from '@kars/kube-core';
import { RuntimeMetrics, WATCH_RESTART_REASONS } from './metrics.js';

/** The value of one sample line, e.g. `kars_x{a="b"}`, or undefined when it is not exported. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

describe('RuntimeMetrics', () => {
  it('exports every watch counter at zero, for every restart reason, as soon as the watch is named', async () => {
    const m = new RuntimeMetrics(new Registry());
    m.watch('policies');
    const text = await m.registry.metrics();
    for (const reason of WATCH_RESTART_REASONS) {
      assert.equal(sample(text, `kars_watch_restarts_total{watch="policies",reason="${reason}"}`), 0, reason);
    }
    for (const type of ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK']) {
      assert.equal(sample(text, `kars_watch_events_total{watch="policies",type="${type}"}`), 0, type);
    }
    assert.equal(sample(text, 'kars_watch_relists_total{watch="policies"}'), 0);
    assert.equal(sample(text, 'kars_watch_drift_repairs_total{watch="policies"}'), 0);
    const age = sample(text, 'kars_watch_last_event_age_seconds{watch="policies"}');
    assert.ok(age !== undefined && age >= 0 && age < 5, `age since creation, got ${age}`);
  });

  it('counts events, restarts, relists and drift repairs per watch', async () => {
    const m = new RuntimeMetrics(new Registry());
    const w = m.watch('policies');
    const other = m.watch('sandboxes');
    w.event('ADDED');
    w.event('ADDED');
    w.event('MODIFIED');
    w.bookmark();
    w.restart('idle');
    w.restart('expired');
    w.restart('expired');
    w.relist();
    w.driftRepaired(3);
    w.driftRepaired(0);
    other.event('DELETED');
    const text = await m.registry.metrics();
    assert.equal(sample(text, 'kars_watch_events_total{watch="policies",type="ADDED"}'), 2);
    assert.equal(sample(text, 'kars_watch_events_total{watch="policies",type="MODIFIED"}'), 1);
    assert.equal(sample(text, 'kars_watch_events_total{watch="policies",type="BOOKMARK"}'), 1);
    assert.equal(sample(text, 'kars_watch_events_total{watch="policies",type="DELETED"}'), 0);
    assert.equal(sample(text, 'kars_watch_events_total{watch="sandboxes",type="DELETED"}'), 1);
    assert.equal(sample(text, 'kars_watch_restarts_total{watch="policies",reason="idle"}'), 1);
    assert.equal(sample(text, 'kars_watch_restarts_total{watch="policies",reason="expired"}'), 2);
    assert.equal(sample(text, 'kars_watch_restarts_total{watch="policies",reason="ping"}'), 0);
    assert.equal(sample(text, 'kars_watch_relists_total{watch="policies"}'), 1);
    assert.equal(sample(text, 'kars_watch_drift_repairs_total{watch="policies"}'), 3);
  });

  it('computes the last-event age when scraped, reset by events and bookmarks', async () => {
    const clock = new FakeClock();
    const m = new RuntimeMetrics(new Registry(), { clock });
    const w = m.watch('policies');
    clock.advance(5000);
    assert.equal(w.lastEventAgeSeconds(), 5);
    assert.equal(sample(await m.registry.metrics(), 'kars_watch_last_event_age_seconds{watch="policies"}'), 5);
    w.event('ADDED');
    clock.advance(1500);
    assert.equal(sample(await m.registry.metrics(), 'kars_watch_last_event_age_seconds{watch="policies"}'), 1.5);
    w.bookmark();
    assert.equal(sample(await m.registry.metrics(), 'kars_watch_last_event_age_seconds{watch="policies"}'), 0);
    w.restart('error');
    w.relist();
    clock.advance(2000);
    assert.equal(w.lastEventAgeSeconds(), 2, 'restarts and relists do not count as events');
  });

  it('returns the same handle for the same name without resetting its counts', async () => {
    const m = new RuntimeMetrics(new Registry());
    m.watch('policies').relist();
    assert.equal(m.watch('policies'), m.watch('policies'));
    m.controller('c').reconciled('success', 0.1);
    m.controller('c');
    m.leader('l').set(true);
    m.leader('l');
    const text = await m.registry.metrics();
    assert.equal(sample(text, 'kars_watch_relists_total{watch="policies"}'), 1);
    assert.equal(sample(text, 'kars_controller_reconcile_total{controller="c",result="success"}'), 1);
    assert.equal(sample(text, 'kars_leader_is_leader{lease="l"}'), 1);
  });

  it('exports controller metrics at zero and records queue depth, results, errors and durations', async () => {
    const m = new RuntimeMetrics(new Registry());
    const c = m.controller('sandboxes');
    let text = await m.registry.metrics();
    for (const result of ['success', 'error', 'requeue']) {
      assert.equal(sample(text, `kars_controller_reconcile_total{controller="sandboxes",result="${result}"}`), 0, result);
    }
    assert.equal(sample(text, 'kars_controller_reconcile_errors_total{controller="sandboxes"}'), 0);
    assert.equal(sample(text, 'kars_controller_queue_depth{controller="sandboxes"}'), 0);
    assert.equal(sample(text, 'kars_controller_reconcile_duration_seconds_count{controller="sandboxes"}'), 0);

    c.queueDepth(7);
    c.reconciled('success', 0.003);
    c.reconciled('requeue', 0.2);
    c.reconciled('error', 2);
    c.reconciled('error', 0.02);
    text = await m.registry.metrics();
    assert.equal(sample(text, 'kars_controller_queue_depth{controller="sandboxes"}'), 7);
    assert.equal(sample(text, 'kars_controller_reconcile_total{controller="sandboxes",result="success"}'), 1);
    assert.equal(sample(text, 'kars_controller_reconcile_total{controller="sandboxes",result="requeue"}'), 1);
    assert.equal(sample(text, 'kars_controller_reconcile_total{controller="sandboxes",result="error"}'), 2);
    assert.equal(sample(text, 'kars_controller_reconcile_errors_total{controller="sandboxes"}'), 2);
    assert.equal(sample(text, 'kars_controller_reconcile_duration_seconds_count{controller="sandboxes"}'), 4);
    assert.equal(sample(text, 'kars_controller_reconcile_duration_seconds_bucket{le="0.005",controller="sandboxes"}'), 1);
    assert.equal(sample(text, 'kars_controller_reconcile_duration_seconds_bucket{le="1",controller="sandboxes"}'), 3);
    assert.ok(Math.abs(sample(text, 'kars_controller_reconcile_duration_seconds_sum{controller="sandboxes"}')! - 2.223) < 1e-9);
  });

  it('exports leadership as 0 until set, then 1 or 0', async () => {
    const m = new RuntimeMetrics(new Registry());
    const l = m.leader('kars-controller');
    assert.equal(sample(await m.registry.metrics(), 'kars_leader_is_leader{lease="kars-controller"}'), 0);
    l.set(true);
    assert.equal(sample(await m.registry.metrics(), 'kars_leader_is_leader{lease="kars-controller"}'), 1);
    l.set(false);
    assert.equal(sample(await m.registry.metrics(), 'kars_leader_is_leader{lease="kars-controller"}'), 0);
  });

  it('collects process metrics into its own registry by default, and none into a registry it is given', async () => {
    const own = new RuntimeMetrics();
    assert.match(await own.registry.metrics(), /^process_cpu_user_seconds_total /m);
    const given = new RuntimeMetrics(new Registry());
    assert.doesNotMatch(await given.registry.metrics(), /process_cpu_user_seconds_total/);
  });

  it('keeps separate instances apart, each in its own registry', async () => {
    const a = new RuntimeMetrics(new Registry());
    const b = new RuntimeMetrics(new Registry());
    a.watch('x').relist();
    b.watch('x');
    assert.equal(sample(await b.registry.metrics(), 'kars_watch_relists_total{watch="x"}'), 0);
  });
});
