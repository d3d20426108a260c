// createMcpGateways: one gateway per MCP server, at /mcp (unnamed) and /mcp/<name>, each with its
// listing; a name that is not a DNS label, or one given twice, is refused before anything serves.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '@kars/kube-core';
import { DecisionRecorder } from './decisions/recorder.js';
import { UpstreamClient } from './http/upstream.js';
import { createMcpGateways } from './router-parts.js';
import { EMPTY_SNAPSHOT } from './snapshot.js';

function deps(): Parameters<typeof createMcpGateways>[1] {
  const clock = new FakeClock();
  return {
    snapshot: () => EMPTY_SNAPSHOT,
    client: new UpstreamClient(),
    clock,
    onDecision: () => {},
    decisions: new DecisionRecorder({ sandbox: 'sb', instance: 'r', clock, sink: undefined }),
  };
}

describe('createMcpGateways', () => {
  it('serves the unnamed server at /mcp and each named one at /mcp/<name>, in order, each with its listing', () => {
    const { gateways, listings } = createMcpGateways(
      {
        sandbox: 'sb',
        mcpUpstream: new URL('http://127.0.0.1:9/mcp'),
        mcpUpstreams: [
          { name: 'github', url: new URL('http://127.0.0.1:9/gh') },
          { name: 'jira', url: new URL('http://127.0.0.1:9/j') },
        ],
      },
      deps(),
    );
    assert.deepEqual([...gateways.keys()], ['/mcp', '/mcp/github', '/mcp/jira']);
    assert.deepEqual(
      listings.map((l) => [l.server, l.path]),
      [
        [null, '/mcp'],
        ['github', '/mcp/github'],
        ['jira', '/mcp/jira'],
      ],
    );
    assert.deepEqual([...createMcpGateways({ sandbox: 'sb' }, deps()).gateways.keys()], [], 'no MCP server, no gateway');
  });

  it('refuses a name that is not a lower-case DNS label, and a name given twice', () => {
    const url = new URL('http://127.0.0.1:9/mcp');
    for (const name of ['GitHub', 'git/hub', '-x', '', 'a'.repeat(64), '..'])
      assert.throws(() => createMcpGateways({ sandbox: 'sb', mcpUpstreams: [{ name, url }] }, deps()), /lower-case DNS label/, name);
    assert.throws(
      () =>
        createMcpGateways(
          {
            sandbox: 'sb',
            mcpUpstreams: [
              { name: 'gh', url },
              { name: 'gh', url },
            ],
          },
          deps(),
        ),
      /MCP server gh is given twice/,
    );
  });
});
