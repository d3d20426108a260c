/**
 * The per-API rules (`apis.ts`) and the pipeline decisions that depend on the API: limit fields
 * capped on every API however a hostile agent spells them, what an input stage cannot judge, the
 * provider-run tools refused, appliesTo.action and the provider each route needs.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { APIS, CHAT, COUNT_TOKENS, EMBEDDINGS, MESSAGES, RESPONSES, type InferenceApi } from './apis.js';
import { decideRequest, type Forward, type PipelineContext, type Reject } from './pipeline.js';
import type { ApiRoute } from './routes.js';
import { inferenceRules, safetyRules } from '../testing/rules.js';
import type { InferenceRules } from '../snapshot.js';

const CTX: PipelineContext = { defaultDailyTokens: null, guardrailConfigured: true };
const route = (api: InferenceApi): ApiRoute => ({ kind: 'api', api, prefix: '/v1', deployment: undefined, query: '' });
const budget = (perRequestTokens: number | null): InferenceRules['tokenBudget'] => ({
  perRequestTokens,
  dailyTokens: null,
  monthlyTokens: null,
});

function decide(api: InferenceApi, body: unknown, rules?: InferenceRules): Reject | Forward {
  return decideRequest(Buffer.from(JSON.stringify(body)), route(api), rules, CTX);
}
function code(d: Reject | Forward): string | undefined {
  return d.kind === 'reject' ? d.refusal.body.error.code : undefined;
}
function fwd(d: Reject | Forward): Forward {
  assert.equal(d.kind, 'forward', JSON.stringify(d));
  return d as Forward;
}

const BODIES: Record<string, Record<string, unknown>> = {
  chat: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  responses: { model: 'm', input: 'hi' },
  embeddings: { model: 'e', input: 'hi' },
  messages: { model: 'claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
  count_tokens: { model: 'claude', messages: [{ role: 'user', content: 'hi' }] },
};
const ANTHROPIC = inferenceRules({ provider: 'anthropic' });
const rulesFor = (api: InferenceApi, over: Partial<InferenceRules> = {}): InferenceRules =>
  inferenceRules({ provider: api.wire === 'anthropic' ? 'anthropic' : null, ...over });

describe('limits per API', () => {
  it("Responses: max_output_tokens is capped, filled from the cap, and other APIs' limit fields are refused", () => {
    const r = rulesFor(RESPONSES, { tokenBudget: budget(100) });
    assert.equal(JSON.parse(fwd(decide(RESPONSES, { model: 'm', input: 'x' }, r)).text).max_output_tokens, 100);
    assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', max_output_tokens: 101 }, r)), 'per_request_tokens_exceeded');
    assert.equal(fwd(decide(RESPONSES, { model: 'm', input: 'x', max_output_tokens: 100 }, r)).reserve?.tokens !== undefined, true);
    for (const f of ['max_tokens', 'max_completion_tokens', 'n'])
      assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', [f]: 5 }, r)), 'invalid_token_limit', f);
    for (const v of ['10', 1.5, 0, -1, null, {}, 1e300])
      assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', max_output_tokens: v }, r)), 'invalid_token_limit', String(v));
    assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', reasoning: { max_tokens: 500 } }, r)), 'per_request_tokens_exceeded');
    assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', stream: 'true' }, r)), 'invalid_token_limit');
  });

  it('Responses: background responses are refused (they would run and bill outside the budget)', () => {
    assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', background: true })), 'unsupported_parameter');
    assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', background: 'yes' })), 'unsupported_parameter');
    assert.equal(fwd(decide(RESPONSES, { model: 'm', input: 'x', background: false })).kind, 'forward');
  });

  it('Messages: max_tokens and thinking.budget_tokens are capped; the reservation covers the larger', () => {
    const r = rulesFor(MESSAGES, { tokenBudget: budget(100) });
    const base = { model: 'c', messages: [{ role: 'user', content: 'x' }] };
    const filled = fwd(decide(MESSAGES, base, r));
    assert.equal(JSON.parse(filled.text).max_tokens, 100);
    assert.equal(code(decide(MESSAGES, { ...base, max_tokens: 101 }, r)), 'per_request_tokens_exceeded');
    assert.equal(
      code(decide(MESSAGES, { ...base, max_tokens: 50, thinking: { type: 'enabled', budget_tokens: 101 } }, r)),
      'per_request_tokens_exceeded',
    );
    const f = fwd(decide(MESSAGES, { ...base, max_tokens: 20, thinking: { type: 'enabled', budget_tokens: 80 } }, r));
    assert.equal(f.reserve?.tokens, f.promptBytes + 80);
    for (const f of ['max_completion_tokens', 'max_output_tokens', 'n'])
      assert.equal(code(decide(MESSAGES, { ...base, max_tokens: 5, [f]: 5 }, r)), 'invalid_token_limit', f);
    assert.equal(code(decide(MESSAGES, { ...base, thinking: 'on' }, r)), 'invalid_token_limit');
  });

  it('embeddings reserve the prompt only; token counting reserves nothing', () => {
    const e = fwd(decide(EMBEDDINGS, BODIES['embeddings']));
    assert.equal(e.reserve?.tokens, e.promptBytes);
    assert.equal(fwd(decide(COUNT_TOKENS, BODIES['count_tokens'], ANTHROPIC)).reserve, undefined);
    assert.equal(code(decide(EMBEDDINGS, { ...BODIES['embeddings'], max_tokens: 5 })), 'invalid_token_limit');
  });

  it('property: whatever the limit fields hold, a forwarded request never asks for more than the cap (every charged API)', () => {
    const limitValue = fc.oneof(
      fc.integer({ min: -5, max: 300 }),
      fc.double(),
      fc.string({ maxLength: 4 }),
      fc.constant(null),
      fc.boolean(),
      fc.constant({}),
    );
    const fields = ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'n'];
    fc.assert(
      fc.property(
        fc.constantFrom(CHAT, RESPONSES, MESSAGES),
        fc.dictionary(fc.constantFrom(...fields), limitValue, { maxKeys: 4 }),
        fc.option(fc.record({ type: fc.constant('enabled'), budget_tokens: limitValue }), { nil: undefined }),
        fc.integer({ min: 1, max: 200 }),
        (api, limits, thinking, cap) => {
          const body: Record<string, unknown> = { ...BODIES[api.name], ...limits, ...(thinking !== undefined ? { thinking } : {}) };
          if (api === MESSAGES && !('max_tokens' in limits)) delete body['max_tokens'];
          const d = decide(api, body, rulesFor(api, { tokenBudget: budget(cap) }));
          // Another API's limit fields are refused, never forwarded uncapped.
          if (thinking !== undefined && api !== MESSAGES) assert.equal(d.kind, 'reject', `${api.name} forwarded thinking`);
          if (d.kind === 'reject') return;
          const sent = JSON.parse(d.text) as Record<string, unknown>;
          const n = typeof sent['n'] === 'number' ? sent['n'] : 1;
          for (const f of ['max_tokens', 'max_completion_tokens', 'max_output_tokens']) {
            const v = sent[f];
            if (v !== undefined)
              assert.ok(typeof v === 'number' && n * v <= cap, `${api.name} forwarded ${f}=${String(v)} × n=${n} over cap ${cap}`);
          }
          const t = (sent['thinking'] as Record<string, unknown> | undefined)?.['budget_tokens'];
          if (t !== undefined) assert.ok(typeof t === 'number' && t <= cap);
          // And some limit is always present: nothing is forwarded unbounded under a cap.
          assert.ok(
            fields.some((f) => typeof sent[f] === 'number'),
            `${api.name} forwarded no limit under a cap`,
          );
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('what an input stage cannot judge, per API', () => {
  const guarded = (api: InferenceApi): InferenceRules =>
    rulesFor(api, { guardrails: [{ provider: 'openai-moderation', applyTo: 'input' }] });
  const unjudgeable = (api: InferenceApi, body: unknown): string | undefined => code(decide(api, body, guarded(api)));

  it('Responses: media parts, unknown items and stored context are refused; text items pass', () => {
    const img = { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] };
    assert.equal(unjudgeable(RESPONSES, img), 'inference_policy_guardrail_unjudgeable');
    assert.equal(
      unjudgeable(RESPONSES, { model: 'm', input: 'x', previous_response_id: 'resp_1' }),
      'inference_policy_guardrail_unjudgeable',
    );
    assert.equal(
      unjudgeable(RESPONSES, { model: 'm', input: [{ type: 'item_reference', id: 'msg_1' }] }),
      'inference_policy_guardrail_unjudgeable',
    );
    assert.equal(
      unjudgeable(RESPONSES, {
        model: 'm',
        input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'x' }] }],
      }),
      'inference_policy_guardrail_unjudgeable',
    );
    const text = {
      model: 'm',
      instructions: 'be brief',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
        { type: 'function_call_output', call_id: 'c', output: 'ok' },
      ],
    };
    const f = fwd(decide(RESPONSES, text, guarded(RESPONSES)));
    for (const t of ['be brief', 'hi', 'ok']) assert.ok(f.moderateInput?.includes(t), t);
  });

  it('Messages: image and document blocks (also inside tool results) are refused; system, text and tool blocks are judged', () => {
    const msg = (content: unknown): unknown => ({ model: 'c', max_tokens: 5, messages: [{ role: 'user', content }] });
    assert.equal(
      unjudgeable(MESSAGES, msg([{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }])),
      'inference_policy_guardrail_unjudgeable',
    );
    assert.equal(
      unjudgeable(MESSAGES, msg([{ type: 'document', source: { type: 'url', url: 'https://x' } }])),
      'inference_policy_guardrail_unjudgeable',
    );
    assert.equal(
      unjudgeable(MESSAGES, msg([{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: {} }] }])),
      'inference_policy_guardrail_unjudgeable',
    );
    const f = fwd(
      decide(
        MESSAGES,
        {
          ...(msg([
            { type: 'text', text: 'hello' },
            { type: 'tool_result', tool_use_id: 't', content: 'result text' },
          ]) as object),
          system: [{ type: 'text', text: 'sys' }],
        },
        guarded(MESSAGES),
      ),
    );
    for (const t of ['hello', 'result text', 'sys']) assert.ok(f.moderateInput?.includes(t), t);
  });

  it('embeddings: token ids are refused; text passes', () => {
    assert.equal(unjudgeable(EMBEDDINGS, { model: 'e', input: [[1, 2, 3]] }), 'inference_policy_guardrail_unjudgeable');
    assert.equal(fwd(decide(EMBEDDINGS, { model: 'e', input: ['a', 'b'] }, guarded(EMBEDDINGS))).kind, 'forward');
  });
});

describe('provider-run tools are refused (they reach the network from the provider, outside egress and ToolPolicy)', () => {
  it('Responses: web search, MCP, code interpreter … refused; function and custom tools pass', () => {
    for (const type of [
      'web_search',
      'web_search_preview',
      'mcp',
      'code_interpreter',
      'file_search',
      'image_generation',
      'computer_use_preview',
      'Function',
    ])
      assert.equal(code(decide(RESPONSES, { model: 'm', input: 'x', tools: [{ type }] })), 'inference_policy_provider_tool_refused', type);
    assert.equal(
      fwd(
        decide(RESPONSES, {
          model: 'm',
          input: 'x',
          tools: [
            { type: 'function', name: 'f' },
            { type: 'custom', name: 'g' },
          ],
        }),
      ).kind,
      'forward',
    );
  });

  it('Messages: server tools and the MCP connector refused; custom and client tools pass', () => {
    const base = BODIES['messages'] as Record<string, unknown>;
    for (const type of ['web_search_20250305', 'web_fetch_20250910', 'code_execution_20250825', 'bash'])
      assert.equal(
        code(decide(MESSAGES, { ...base, tools: [{ type, name: 't' }] }, ANTHROPIC)),
        'inference_policy_provider_tool_refused',
        type,
      );
    assert.equal(
      code(decide(MESSAGES, { ...base, mcp_servers: [{ type: 'url', url: 'https://evil' }] }, ANTHROPIC)),
      'inference_policy_provider_tool_refused',
    );
    const ok = {
      ...base,
      tools: [
        { name: 'f', input_schema: { type: 'object' } },
        { type: 'bash_20250124', name: 'bash' },
        { type: 'text_editor_20250728', name: 'e' },
      ],
    };
    assert.equal(fwd(decide(MESSAGES, ok, ANTHROPIC)).kind, 'forward');
  });

  it('media sent as bytes or by file id passes; a tool schema naming image_url is no media', () => {
    const chat = {
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }],
    };
    assert.equal(fwd(decide(CHAT, chat)).kind, 'forward');
    const resp = { model: 'm', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] };
    assert.equal(fwd(decide(RESPONSES, resp)).kind, 'forward');
    const schema = {
      type: 'function',
      name: 'f',
      parameters: { type: 'object', properties: { image_url: { type: 'string', url: 'https://x' } } },
    };
    assert.equal(fwd(decide(RESPONSES, { model: 'm', input: 'x', tools: [schema] })).kind, 'forward');
    const img = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } };
    assert.equal(
      fwd(decide(MESSAGES, { model: 'c', max_tokens: 5, messages: [{ role: 'user', content: [img] }] }, ANTHROPIC)).kind,
      'forward',
    );
    const byUrl = { type: 'image', source: { type: 'url', url: 'https://x/y.png' } };
    const inResult = [{ type: 'tool_result', tool_use_id: 't', content: [byUrl] }];
    assert.equal(
      code(decide(MESSAGES, { model: 'c', max_tokens: 5, messages: [{ role: 'user', content: inResult }] }, ANTHROPIC)),
      'inference_policy_provider_tool_refused',
    );
  });

  it('a request without a limit, under a daily budget, is limited to what it reserves', () => {
    const daily = inferenceRules({ tokenBudget: { perRequestTokens: null, dailyTokens: 10_000, monthlyTokens: null } });
    const f = fwd(decide(CHAT, { ...BODIES['chat'], n: 4 }, daily));
    assert.equal(JSON.parse(f.text).max_tokens, 1024);
    assert.equal(f.reserve?.tokens, f.promptBytes + 4096);
    // No budget at all: nothing to protect, the request is forwarded as it is.
    assert.equal(JSON.parse(fwd(decide(CHAT, BODIES['chat'])).text).max_tokens, undefined);
  });

  it('chat: web_search_options refused', () => {
    assert.equal(code(decide(CHAT, { ...BODIES['chat'], web_search_options: {} })), 'inference_policy_provider_tool_refused');
  });
});

describe('appliesTo.action and providers', () => {
  it('a policy governs only the routes of its action; on another route no policy is in force, and the request is refused', () => {
    const actions = ['chat', 'responses', 'embeddings', 'image', '*'] as const;
    for (const api of APIS)
      for (const action of actions) {
        const d = decide(api, BODIES[api.name], rulesFor(api, { action }));
        const covered = action === '*' || action === api.action;
        assert.equal(code(d) === 'inference_policy_action_not_covered', !covered, `${api.name} under action ${action}`);
        if (!covered) assert.equal((d as Reject).refusal.status, 403);
      }
    // Unbound (no InferencePolicy): the router's defaults govern every route.
    for (const api of APIS) assert.equal(decide(api, BODIES[api.name]).kind, 'forward', api.name);
  });

  it('a route whose API no policy provider speaks is refused; a fallback that speaks it is chosen', () => {
    assert.equal(
      code(decide(MESSAGES, BODIES['messages'], inferenceRules({ provider: 'azure-openai' }))),
      'inference_policy_provider_mismatch',
    );
    assert.equal(code(decide(CHAT, BODIES['chat'], inferenceRules({ provider: 'anthropic' }))), 'inference_policy_provider_mismatch');
    assert.equal(
      code(decide(RESPONSES, BODIES['responses'], inferenceRules({ provider: 'ollama' }))),
      'inference_policy_provider_mismatch',
    );
    const mixed = inferenceRules({
      modelPreference: {
        primary: { provider: 'azure-openai', deployment: 'gpt' },
        fallback: [{ provider: 'anthropic', deployment: 'claude' }],
      },
    });
    assert.deepEqual(fwd(decide(MESSAGES, BODIES['messages'], mixed)).candidates, [{ provider: 'anthropic', deployment: 'claude' }]);
    assert.deepEqual(fwd(decide(CHAT, BODIES['chat'], mixed)).candidates, [{ provider: 'azure-openai', deployment: 'gpt' }]);
    assert.equal(decide(CHAT, BODIES['chat'], inferenceRules({ provider: 'bedrock' })).kind === 'reject', true);
  });

  it('a content-safety floor on an API whose answers carry no annotations fails closed; embeddings and counting have no text to hold to it', () => {
    const floor = safetyRules({ hate: 'Low' });
    assert.equal(
      code(decide(RESPONSES, BODIES['responses'], rulesFor(RESPONSES, { contentSafety: floor }))),
      'inference_policy_content_safety_unenforceable',
    );
    assert.equal(
      code(decide(MESSAGES, BODIES['messages'], rulesFor(MESSAGES, { contentSafety: floor }))),
      'inference_policy_content_safety_unenforceable',
    );
    assert.equal(fwd(decide(CHAT, BODIES['chat'], rulesFor(CHAT, { contentSafety: floor }))).floor?.hate, 'Low');
    assert.equal(fwd(decide(EMBEDDINGS, BODIES['embeddings'], rulesFor(EMBEDDINGS, { contentSafety: floor }))).floor, undefined);
  });
});
