// The manifests run kars's processes as the code's defaults say: the watch PING (ADR 0038's
// repair bound) and the router's node options (ADR 0059). Helm's sandboxes render the same objects
// as deploy/examples/sandbox-router (helm.test.ts), so its router is held to this too.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { DEFAULT_WATCH_CONFIG } from '@kars/kube-runtime';
import { ROUTER_NODE_OPTIONS } from '@kars/router/process-options';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../..');

interface Container {
  name: string;
  env?: Array<{ name: string; value?: string }>;
}
function container(file: string, name: string): Container {
  const dep = parse(readFileSync(join(ROOT, file), 'utf8')) as { spec: { template: { spec: { containers: Container[] } } } };
  const c = dep.spec.template.spec.containers.find((x) => x.name === name);
  assert.ok(c, `${file} has a container ${name}`);
  return c;
}
const envOf = (c: Container, k: string): string | undefined => c.env?.find((e) => e.name === k)?.value;

void describe('deploy/: process settings match the code', () => {
  for (const [file, name] of [
    ['deploy/base/deployment.yaml', 'controller'],
    ['deploy/examples/sandbox-router/deployment.yaml', 'router'],
  ] as const) {
    it(`${file} (${name}): the HTTP/2 PING interval and timeout are the defaults (silent drop repaired within 10 s)`, () => {
      const c = container(file, name);
      assert.equal(envOf(c, 'KARS_HTTP2_PING_INTERVAL_SECS'), String(DEFAULT_WATCH_CONFIG.pingIntervalMs / 1000));
      assert.equal(envOf(c, 'KARS_HTTP2_PING_TIMEOUT_SECS'), String(DEFAULT_WATCH_CONFIG.pingTimeoutMs / 1000));
    });
  }

  it("the router container runs with the router's node options", () => {
    assert.equal(envOf(container('deploy/examples/sandbox-router/deployment.yaml', 'router'), 'NODE_OPTIONS'), ROUTER_NODE_OPTIONS);
    const helm = readFileSync(join(ROOT, 'deploy/helm/kars/templates/sandboxes.yaml'), 'utf8');
    assert.ok(helm.includes(`{name: NODE_OPTIONS, value: "${ROUTER_NODE_OPTIONS}"}`), 'the Helm chart sets them too');
  });
});
