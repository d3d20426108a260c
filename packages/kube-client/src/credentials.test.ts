import { describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { FakeClock } from '@kars/kube-core';
import { Credentials, HEADERS_TTL_MS } from './credentials.js';

function kubeConfig(token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: false }],
    users: [{ name: 'u', token }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

describe('Credentials.headers', () => {
  it('asks client-node once per second at most, and picks up a rotated token after that', async () => {
    const clock = new FakeClock(1_000_000);
    try {
      const kc = kubeConfig('first');
      const spy = mock.method(kc, 'applyToHTTPSOptions');
      const creds = Credentials.fromKubeConfig(kc);
      creds.clock = clock;
      assert.equal((await creds.headers())['authorization'], 'Bearer first');
      for (let i = 0; i < 50; i++) await creds.headers();
      assert.equal(spy.mock.callCount(), 1, 'one client-node call for 51 requests within the second');
      kc.users[0] = { name: 'u', token: 'second' };
      assert.equal((await creds.headers())['authorization'], 'Bearer first', 'still the cached answer');
      clock.advance(HEADERS_TTL_MS);
      assert.equal((await creds.headers())['authorization'], 'Bearer second', 'the rotated token after the TTL');
      assert.equal(spy.mock.callCount(), 2);
    } finally {
      mock.restoreAll();
    }
  });

  it('does not keep a failed answer', async () => {
    const kc = kubeConfig('t');
    let fail = true;
    const real = kc.applyToHTTPSOptions.bind(kc);
    mock.method(kc, 'applyToHTTPSOptions', async (opts: object) => {
      if (fail) throw new Error('exec plugin failed');
      return real(opts as never);
    });
    const creds = Credentials.fromKubeConfig(kc);
    await assert.rejects(creds.headers(), /exec plugin failed/);
    fail = false;
    assert.equal((await creds.headers())['authorization'], 'Bearer t');
  });
});
