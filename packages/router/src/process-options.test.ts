import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { ROUTER_NODE_OPTIONS, ROUTER_RUNTIME_V8_FLAG, routerChildEnv, tuneRouterHeap, withRouterNodeOptions } from './process-options.js';

// A young generation grown by surviving allocation: its size after ~1 s of churn, in MiB.
const GROW = `
import v8 from 'node:v8';
let keep = [];
const t = Date.now();
while (Date.now() - t < 1000) { for (let i = 0; i < 1000; i++) keep.push({ a: i, b: 'x' + i }); if (keep.length > 200000) keep = keep.slice(100000); }
process.stdout.write(String(v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size / 1048576));
`;
const youngMib = (nodeOptions: string): number =>
  Number(
    execFileSync(process.execPath, ['--input-type=module', '-e', GROW], { env: { ...process.env, NODE_OPTIONS: nodeOptions } }).toString(),
  );

void describe('router process options (ADR 0059)', () => {
  it('NODE_OPTIONS accepts them and they cap the young generation at 2 × 4 MiB (V8 grows it to 32 MiB without)', () => {
    assert.ok(youngMib(ROUTER_NODE_OPTIONS) <= 8, 'capped');
    assert.ok(youngMib('') > 8, 'the same churn grows it further without the options');
  });

  it('adds them to what is already set, once', () => {
    assert.equal(withRouterNodeOptions(undefined), ROUTER_NODE_OPTIONS);
    assert.equal(withRouterNodeOptions(' --enable-source-maps '), `--enable-source-maps ${ROUTER_NODE_OPTIONS}`);
    assert.equal(withRouterNodeOptions('--max-semi-space-size=16'), '--max-semi-space-size=16', "an operator's own semi-space wins");
    assert.equal(withRouterNodeOptions(withRouterNodeOptions('')), ROUTER_NODE_OPTIONS);
  });

  it("a router child gets them, another command's child nothing", () => {
    assert.deepEqual(routerChildEnv(['router', '--sandbox', 'sb'], '--enable-source-maps'), {
      NODE_OPTIONS: `--enable-source-maps ${ROUTER_NODE_OPTIONS}`,
    });
    assert.deepEqual(routerChildEnv(['controller'], undefined), {});
    assert.deepEqual(routerChildEnv(['stub', 'router'], undefined), {});
  });

  it("tuneRouterHeap's flag is one this V8 knows (setFlagsFromString ignores an unknown one; node's command line refuses it)", () => {
    tuneRouterHeap();
    const out = execFileSync(process.execPath, [ROUTER_RUNTIME_V8_FLAG, '-e', 'process.stdout.write("ok")']).toString();
    assert.equal(out, 'ok');
  });
});
