/**
 * The four kars CustomResourceDefinitions (apiextensions.k8s.io/v1): InferencePolicy, ToolPolicy, EgressApproval
 * and KarsSandbox.
 *
 * The schemas below are the single source of truth for the wire shape. Each is a typed literal; the `_Check*`
 * aliases at the bottom assert at compile time that `FromSchema<schema>` equals the hand-written interface in
 * `types.ts` (see `schema-types.ts` for how). Editing one side without the other fails `tsc -b`.
 *
 * Where the contract says a rule is CEL we write it as `x-kubernetes-validations`; where an OpenAPI keyword says the
 * same thing (enums, min/max, lengths) we use the keyword, because kube-apiserver's message for it is clearer and
 * it costs nothing at admission. Rules only the controller can check (the TTL ceiling, which depends on the
 * controller's env; control bytes in `reason`) live in `validate.ts`.
 *
 * Nothing here runs at import time beyond building constant objects.
 */
import { EGRESS_APPROVAL, INFERENCE_POLICY, KARS_CATEGORY, KARS_SANDBOX, TOOL_POLICY, type KarsResource } from './types.js';
import type {
  EgressApprovalSpec,
  EgressApprovalStatus,
  InferencePolicySpec,
  InferencePolicyStatus,
  KarsSandboxSpec,
  KarsSandboxStatus,
  ToolPolicySpec,
  ToolPolicyStatus,
} from './types.js';
import type { Assert, FromSchema, JSONSchemaProps, SameType } from './schema-types.js';
import { TOOL_DIGEST_PATTERN } from './tool-pin.js';

// ---------------------------------------------------------------------------------------------------------------
// Shared pieces

/** metav1.Condition, as in k8s.io/apimachinery (the same limits kube-apiserver's own types declare). */
const conditionSchema = {
  type: 'object',
  description: 'One observation of the object state (metav1.Condition).',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: {
      type: 'string',
      description: 'Condition type: Ready, Progressing or Degraded.',
      maxLength: 316,
      pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'], description: 'True, False or Unknown.' },
    observedGeneration: {
      type: 'integer',
      format: 'int64',
      minimum: 0,
      description: 'metadata.generation of the spec this condition was computed from.',
    },
    lastTransitionTime: {
      type: 'string',
      format: 'date-time',
      description: 'RFC 3339 time the status last changed; kept when only the reason or message changes.',
    },
    reason: {
      type: 'string',
      minLength: 1,
      maxLength: 1024,
      pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
      description: 'CamelCase machine-readable reason, e.g. RouterEnforcing, AwaitingRouterEnforcement, InvalidSpec.',
    },
    message: { type: 'string', maxLength: 32768, description: 'Human-readable detail, e.g. which routers confirmed the digest.' },
  },
} as const satisfies JSONSchemaProps;

const conditionsSchema = {
  type: 'array',
  description: 'Ready, Progressing and Degraded, each with observedGeneration.',
  items: conditionSchema,
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
} as const satisfies JSONSchemaProps;

const observedGenerationSchema = {
  type: 'integer',
  format: 'int64',
  minimum: 0,
  description: 'metadata.generation of the spec this status describes.',
} as const satisfies JSONSchemaProps;

/** A signed OCI bundle, pinned by digest. */
const ociRefSchema = {
  type: 'object',
  description: 'A cosign-signed OCI bundle, pinned by manifest digest.',
  required: ['registry', 'repository', 'digest'],
  properties: {
    registry: { type: 'string', minLength: 1, maxLength: 253, description: 'Registry host, e.g. myregistry.azurecr.io.' },
    repository: { type: 'string', minLength: 1, maxLength: 255, description: 'Repository path in the registry, e.g. policies/demo.' },
    digest: { type: 'string', pattern: '^sha256:[a-f0-9]{64}$', description: 'Manifest digest, sha256:<64 hex>.' },
    tag: { type: 'string', maxLength: 128, description: 'Informational; the digest decides.' },
  },
} as const satisfies JSONSchemaProps;

const labelMapSchema = {
  type: 'object',
  additionalProperties: { type: 'string', description: 'Label value.' },
  default: {},
  description: 'Label selector (key: value, all must match). Default {}.',
} as const satisfies JSONSchemaProps;

/**
 * An IPv6 address as RFC 3986 §3.2.2 `IPv6address` spells it (hex groups, one `::`, an optional
 * dotted-quad tail), written out as a regular expression that RE2 (kube-apiserver) and ECMAScript
 * read alike. No brackets and no zone id: the port is its own field, and a zone names an
 * interface of one machine.
 */
export const IPV6_PATTERN = ((): string => {
  const h16 = '[0-9A-Fa-f]{1,4}';
  const octet = '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
  const ls32 = `(${h16}:${h16}|${octet}(\\.${octet}){3})`;
  /** `n` repetitions of `h16:`. */
  const groups = (n: number): string => (n === 0 ? '' : `(${h16}:){${n}}`);
  /** `[ *n( h16 ":" ) h16 ]`: up to n+1 groups before `::`. */
  const head = (n: number): string => (n < 0 ? '' : `((${h16}:){0,${n}}${h16})?`);
  const forms = [
    `${groups(6)}${ls32}`,
    `::${groups(5)}${ls32}`,
    `${head(0)}::${groups(4)}${ls32}`,
    `${head(1)}::${groups(3)}${ls32}`,
    `${head(2)}::${groups(2)}${ls32}`,
    `${head(3)}::${h16}:${ls32}`,
    `${head(4)}::${ls32}`,
    `${head(5)}::${h16}`,
    `${head(6)}::`,
  ];
  return `(${forms.map((f) => `(${f})`).join('|')})`;
})();

/**
 * A host: a name or IPv4 literal (no scheme, path, port, user info, query or whitespace), or an
 * IPv6 literal without brackets (`::1`, `2001:db8::1`; ADR 0045), the form the wire contract's
 * `{host, port}` endpoint carries.
 */
export const HOST_PATTERN = `^([^\\s/:@?#]+|${IPV6_PATTERN})$`;

const endpointSchema = {
  type: 'object',
  description: 'One egress endpoint: host and TCP port.',
  required: ['host'],
  properties: {
    host: {
      type: 'string',
      minLength: 1,
      maxLength: 253,
      pattern: HOST_PATTERN,
      description:
        'Host name, IPv4 address or IPv6 address without brackets (no scheme, path or port), e.g. api.example.com or 2001:db8::1.',
    },
    port: {
      type: 'integer',
      format: 'int32',
      minimum: 1,
      maximum: 65535,
      description: 'TCP port, 1 to 65535. Absent: 443 in the compiled form (the egress proxy then admits host:443 only).',
    },
  },
} as const satisfies JSONSchemaProps;

const nameRefSchema = {
  type: 'object',
  required: ['name'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 253, description: 'Name of the object in the same namespace.' } },
} as const satisfies JSONSchemaProps;

const propagationSchema = {
  type: 'object',
  description: 'How long the last edit took to reach the routers (kars only).',
  properties: {
    lastMs: {
      type: 'integer',
      format: 'int64',
      minimum: 0,
      description: 'Milliseconds from the last edit (generation change) to every referencing router enforcing its digest.',
    },
    maxMs: {
      type: 'integer',
      format: 'int64',
      minimum: 0,
      description: 'Milliseconds: the longest edit → every router enforcing recorded for this policy.',
    },
    lastCompileMs: {
      type: 'integer',
      format: 'int64',
      minimum: 0,
      description: 'Milliseconds from the last edit to its compiled ConfigMap being written.',
    },
  },
} as const satisfies JSONSchemaProps;

const digestStatus = {
  type: 'string',
  description: 'sha256:<64 hex> canonical digest of the compiled bytes; the value each router must echo.',
} as const satisfies JSONSchemaProps;
const nullableDigestStatus = {
  type: 'string',
  nullable: true,
  description: 'Set to the compiled digest only once every router confirmed it; otherwise null.',
} as const satisfies JSONSchemaProps;
const timeStatus = { type: 'string', format: 'date-time', description: 'RFC 3339 UTC time.' } as const satisfies JSONSchemaProps;
const policyPhaseStatus = {
  type: 'string',
  enum: ['Compiled', 'Ready', 'Degraded'],
  description:
    'Compiled: the ConfigMap is written, not every referencing router echoes it yet. Ready: every router echoes the compiled digest. Degraded: the spec cannot be compiled (see the Degraded condition).',
} as const satisfies JSONSchemaProps;

const uint64 = { type: 'integer', format: 'int64', minimum: 0 } as const satisfies JSONSchemaProps;
const uint32 = { type: 'integer', format: 'int64', minimum: 0, maximum: 4294967295 } as const satisfies JSONSchemaProps;
const severity = { type: 'string', enum: ['Safe', 'Low', 'Medium', 'High'] } as const satisfies JSONSchemaProps;
/** The content-safety description for one category. */
function severityOf(category: string): { readonly description: string } {
  return {
    description: `Highest tolerated ${category} severity (Safe < Low < Medium < High). The router blocks a response whose upstream content-filter annotation for ${category} is strictly above it (403 inference_policy_content_safety_exceeded). Absent: ${category} is not policed.`,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// InferencePolicy (contract §1.1)

const modelRefSchema = {
  type: 'object',
  required: ['provider', 'deployment'],
  description: 'One upstream route: provider and deployment.',
  properties: {
    provider: {
      type: 'string',
      minLength: 1,
      description:
        'azure-openai, anthropic, ollama or bedrock. On primary a recognised value overrides spec.provider; a bedrock fallback is skipped.',
    },
    deployment: {
      type: 'string',
      minLength: 1,
      description: 'Deployment (model) name; the router writes it into the forwarded request (the Azure path segment, or the body model).',
    },
  },
} as const satisfies JSONSchemaProps;

/** `spec.enforcement` (kars addition, ADR 0050), the same on both policy kinds. */
function enforcementSchema(kind: 'InferencePolicy' | 'ToolPolicy') {
  const ref = kind === 'InferencePolicy' ? 'spec.inferenceRef' : 'spec.governance.toolPolicyRef';
  return {
    type: 'string',
    enum: ['Enforce', 'DryRun'],
    description: `Enforce (absent means Enforce): routers enforce this policy for the sandboxes whose ${ref} names it. DryRun: routers of every sandbox that appliesTo selects decide each request as this policy would and record the would-be decision, while the request proceeds under the policy the sandbox enforces; a sandbox that references a DryRun policy keeps its last enforced one (ADR 0050).`,
  } as const;
}

export const inferencePolicySpecSchema = {
  type: 'object',
  description: 'Inference policy for the sandboxes appliesTo selects.',
  required: ['appliesTo'],
  properties: {
    appliesTo: {
      type: 'object',
      description:
        'Selector (the fields are ANDed), compiled into the profile unchanged. A sandbox gets this policy through its KarsSandbox spec.inferenceRef; the router does not evaluate appliesTo.',
      properties: {
        sandboxName: {
          type: 'string',
          maxLength: 253,
          description: 'Sandbox name. Empty or absent: any sandbox in the namespace. Recorded, not evaluated by the router.',
        },
        sandboxMatchLabels: {
          ...labelMapSchema,
          description: 'Sandbox labels that must all match. Default {}. Recorded, not evaluated by the router.',
        },
        action: {
          type: 'string',
          enum: ['chat', 'responses', 'image', 'embeddings', '*'],
          default: '*',
          description:
            'Which inference action the policy is meant for: chat, responses, image, embeddings or * (default). Recorded, not evaluated: the router applies the policy to every inference request.',
        },
      },
    },
    tokenBudget: {
      type: 'object',
      description: 'Caps on input+output tokens. Absent: no budget from this policy.',
      properties: {
        perRequestTokens: {
          ...uint64,
          description:
            'Tokens. Most completion tokens one request may ask for (n × max(max_tokens, max_completion_tokens)); above it the router answers 429 per_request_tokens_exceeded. A request that sets no limit gets max_tokens = floor(cap / n) written in. Absent: no per-request cap.',
        },
        dailyTokens: {
          ...uint64,
          description:
            'Tokens (input + output, usage.total_tokens) per sandbox per UTC calendar day. Each request reserves its maximum before forwarding; once usage plus reservations reaches the cap the router answers 429 budget_exceeded. Absent: the TOKEN_BUDGET_DAILY env var of the router, else no daily cap. Counters live in router memory and reset when it restarts.',
        },
        monthlyTokens: {
          ...uint64,
          description:
            'Tokens per sandbox per UTC calendar month, enforced like dailyTokens (429 budget_exceeded). Must be ≥ dailyTokens. Absent: no monthly cap.',
        },
      },
      'x-kubernetes-validations': [
        {
          rule: '!has(self.dailyTokens) || !has(self.monthlyTokens) || self.monthlyTokens >= self.dailyTokens',
          message: 'monthlyTokens must be greater than or equal to dailyTokens',
          fieldPath: '.monthlyTokens',
        },
      ],
    },
    contentSafety: {
      type: 'object',
      description: 'Maximum tolerated severity per category; a finding strictly above it blocks.',
      properties: {
        hate: { ...severity, ...severityOf('hate') },
        selfHarm: { ...severity, ...severityOf('self-harm') },
        sexual: { ...severity, ...severityOf('sexual') },
        violence: { ...severity, ...severityOf('violence') },
        requirePromptShields: {
          type: 'boolean',
          description:
            'When true, the router blocks a response that carries no content-filter annotations at all (403 inference_policy_prompt_shields_required): fail closed. Default false.',
        },
      },
    },
    modelPreference: {
      type: 'object',
      description: 'Preferred route and ordered fallbacks. Absent: the request goes to the deployment it names.',
      required: ['primary'],
      properties: {
        primary: { ...modelRefSchema, description: 'The route tried first; its deployment replaces the one the request names.' },
        fallback: {
          type: 'array',
          items: modelRefSchema,
          default: [],
          description:
            'Tried in order when the previous candidate answers 5xx or 429 or cannot be reached; the last answer is returned as it is. Empty names, duplicates and bedrock entries are skipped. Default [].',
        },
      },
    },
    provider: {
      type: 'string',
      enum: ['azure-openai', 'anthropic', 'ollama', 'bedrock'],
      description:
        'Upstream provider: azure-openai, anthropic, ollama or bedrock. A recognised modelPreference.primary.provider overrides it. Absent: azure-openai. The router answers bedrock with 501 provider_unimplemented. Not defaulted here: bundleRef excludes it.',
    },
    guardrails: {
      type: 'array',
      description:
        'Ordered guardrail stages; the first that flags content blocks (403 inference_policy_guardrail_flagged). A router without a backend for a stage refuses the whole policy (NACK, never Ready); a backend that cannot answer fails the request closed (503 guardrail_unavailable).',
      items: {
        type: 'object',
        description: 'One guardrail stage.',
        required: ['provider'],
        properties: {
          provider: {
            type: 'string',
            enum: ['openai-moderation'],
            description: 'openai-moderation: the OpenAI /v1/moderations API (kars router --guardrail-url).',
          },
          applyTo: {
            type: 'string',
            enum: ['input', 'output', 'both'],
            description: 'input (the request), output (the answer) or both. Absent: both.',
          },
        },
      },
    },
    displayName: { type: 'string', description: 'Human-readable label; compiled, not enforced.' },
    bundleRef: {
      ...ociRefSchema,
      description:
        'Signed OCI bundle with the policy content; exclusive with every content field, appliesTo always comes from this object. Accepted by the schema, but this kars does not fetch or verify bundles: the controller marks the policy Degraded (InvalidRef).',
    },
    enforcement: enforcementSchema('InferencePolicy'),
  },
  'x-kubernetes-validations': [
    {
      rule: '!has(self.bundleRef) || !(has(self.tokenBudget) || has(self.contentSafety) || has(self.modelPreference) || has(self.provider) || has(self.guardrails) || has(self.displayName))',
      message: 'bundleRef is mutually exclusive with tokenBudget, contentSafety, modelPreference, provider, guardrails and displayName',
      reason: 'FieldValueForbidden',
      fieldPath: '.bundleRef',
    },
  ],
} as const satisfies JSONSchemaProps;

/** The status fields InferencePolicy and ToolPolicy share: phase, observedGeneration and conditions. */
const POLICY_STATUS_PROPERTIES = {
  phase: policyPhaseStatus,
  observedGeneration: observedGenerationSchema,
  conditions: conditionsSchema,
} as const;

export const inferencePolicyStatusSchema = {
  type: 'object',
  description: 'Written by the controller.',
  properties: {
    ...POLICY_STATUS_PROPERTIES,
    profileConfigMapRef: {
      type: 'object',
      description: 'The compiled ConfigMap.',
      required: ['name'],
      properties: { name: { type: 'string', description: 'The ConfigMap this policy compiled to, in this namespace.' } },
    },
    versionHash: { type: 'string', description: '32 hex chars (legacy change detection).' },
    lastCompiledAt: { ...timeStatus, description: 'RFC 3339 UTC time (whole seconds) of the last compile.' },
    compiledDigest: digestStatus,
    loadedDigest: nullableDigestStatus,
    bundleRefDigest: { type: 'string', description: 'OCI manifest digest; only on the bundle path.' },
    propagation: propagationSchema,
  },
} as const satisfies JSONSchemaProps;

// ---------------------------------------------------------------------------------------------------------------
// ToolPolicy (contract §1.2)

/**
 * `"<ISO 4217 code> <amount>"`. At most 12 integer and 3 fraction digits: 15 significant digits convert to a
 * double exactly enough that the CEL `monthlyCap >= dailyCap` comparison below is exact (never wrong either way).
 */
/** Most pins one ToolPolicy holds. */
export const MAX_TOOL_PINS = 1024;
/** Tool names the gateway accepts (ASCII letters, digits, `_ - . / :`; see router tools/names.ts). */
export const TOOL_NAME_PATTERN = '^[A-Za-z0-9_./:-]+$';
/** MCP server names (`kars router --mcp-upstream NAME=URL`): a lower-case DNS-label-like token. */
export const MCP_SERVER_NAME_PATTERN = '^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$';

export const MONEY_PATTERN = '^[A-Z]{3} (0|[1-9][0-9]{0,11})([.][0-9]{1,3})?$';
const money = {
  type: 'string',
  pattern: MONEY_PATTERN,
  description: 'Amount as "<ISO 4217 code> <amount>", e.g. "USD 100.00".',
} as const satisfies JSONSchemaProps;

export const toolPolicySpecSchema = {
  type: 'object',
  description: 'Tool governance for the tools and MCP servers appliesTo selects.',
  required: ['appliesTo'],
  properties: {
    appliesTo: {
      type: 'object',
      description: 'AND selector; of the policies that match a tool call, the router uses the most specific.',
      properties: {
        tool: {
          type: 'string',
          minLength: 1,
          description: 'Tool name the policy governs (compared ignoring case). "*" or absent: every tool.',
        },
        mcpServer: {
          type: 'string',
          minLength: 1,
          description:
            'MCP server name: the NAME of kars router --mcp-upstream NAME=URL (served at /mcp/NAME). "*" or absent: any server. A router that does not front that server refuses the policy (NACK, never Ready).',
        },
        sandboxMatchLabels: {
          ...labelMapSchema,
          description:
            'Sandbox labels that must all match. Default {}. Recorded, not evaluated: a sandbox gets its ToolPolicy through spec.governance.toolPolicyRef.',
        },
      },
    },
    commerce: {
      type: 'object',
      description:
        'AP2 spend caps. Accepted by the schema, but the kars router has no AP2 evaluator: a router refuses a ToolPolicy with commerce (NACK, never Ready) rather than ignore it.',
      properties: {
        dailyCap: {
          ...money,
          description: 'Spend cap per UTC day, "<ISO 4217 code> <amount>", e.g. "USD 100.00". Not enforced (see commerce).',
        },
        monthlyCap: {
          ...money,
          description: 'Spend cap per UTC month, same currency as dailyCap and ≥ it, e.g. "USD 1000.00". Not enforced (see commerce).',
        },
        perTransferCap: { ...money, description: 'Cap per transfer, e.g. "USD 25.00". Not enforced (see commerce).' },
        counterpartyAllowlist: {
          type: 'array',
          items: { type: 'string', minLength: 1, description: 'A counterparty identifier.' },
          default: [],
          description: 'Counterparties transfers may go to; empty means deny-all (fail closed). Default []. Not enforced (see commerce).',
        },
      },
      'x-kubernetes-validations': [
        {
          // Guarded by matches() because a pattern failure does not stop CEL from running.
          rule:
            `!has(self.dailyCap) || !has(self.monthlyCap) || !self.dailyCap.matches('${MONEY_PATTERN}') || !self.monthlyCap.matches('${MONEY_PATTERN}') || ` +
            '(self.monthlyCap.substring(0, 3) == self.dailyCap.substring(0, 3) && double(self.monthlyCap.substring(4)) >= double(self.dailyCap.substring(4)))',
          message: 'monthlyCap must be in the same currency as dailyCap and greater than or equal to it',
          fieldPath: '.monthlyCap',
        },
      ],
    },
    rateLimit: {
      type: 'object',
      description:
        'Token bucket per sandbox, policy and tool, in router memory (each router replica allows the full rate). Over the limit the gateway answers JSON-RPC error rate_limited (-32003) with the time until the next token.',
      properties: {
        rps: {
          ...uint32,
          description: 'Calls per second the bucket refills. 0: never refills (burst calls, then none). Absent: no rate limit.',
        },
        burst: { ...uint32, description: 'Bucket size in calls; starts full. Absent or 0: max(1, rps).' },
        window: {
          type: 'string',
          pattern: '^[1-9][0-9]{0,5}[smhd]$',
          description:
            'A duration such as 1m, 1h or 24h. Accepted and compiled, not enforced: the bucket is defined by rps and burst alone.',
        },
      },
    },
    approval: {
      type: 'object',
      description: 'Human in the loop. When commerce is set the effective default mode is aboveThreshold.',
      properties: {
        mode: {
          type: 'string',
          enum: ['never', 'always', 'aboveThreshold'],
          description:
            'never (default without commerce): no approval. always: the gateway refuses each call with JSON-RPC error approval_required (-32002), as it has no approval channel. aboveThreshold: needs AP2 amounts, so a router refuses the policy (NACK, never Ready).',
        },
        threshold: { type: 'string', description: 'Amount above which aboveThreshold asks for approval. Accepted, not enforced.' },
        channel: { type: 'string', description: 'Where approval requests go. Accepted, not used: the gateway has no approval channel.' },
      },
    },
    displayName: { type: 'string', description: 'Human-readable label; compiled, not enforced.' },
    agtProfile: {
      type: 'object',
      description:
        "The customer's AGT policy profile: exactly one of inline or bundleRef. The only part the router echoes (kind AgtProfile); absent: no AGT rules.",
      properties: {
        inline: {
          type: 'string',
          minLength: 1,
          description:
            'Raw AGT YAML (rules of allow/deny globs, a default), written verbatim to agt-profile.yaml; the gateway denies a matching tools/call with tool_denied (-32001). A profile outside the subset in packages/router/AGT-SUBSET.md is refused (NACK).',
        },
        bundleRef: {
          ...ociRefSchema,
          description:
            'Signed OCI bundle with the AGT YAML. Accepted by the schema, but this kars does not fetch or verify bundles: the controller marks the policy Degraded (InvalidRef).',
        },
      },
      'x-kubernetes-validations': [
        {
          rule: 'has(self.inline) != has(self.bundleRef)',
          message: 'exactly one of inline or bundleRef must be set',
        },
      ],
    },
    toolPins: {
      type: 'array',
      maxItems: MAX_TOOL_PINS,
      description:
        'Approved MCP tool definitions (ADR 0043). The gateway hides a pinned tool from tools/list, and refuses its calls (tool_definition_changed, -32005), unless the definition it last saw listed on the session has this digest. At most one pin per (server, name ignoring case); write them with kars tp pin.',
      items: {
        type: 'object',
        required: ['name', 'digest'],
        description: 'One pinned tool definition.',
        properties: {
          name: {
            type: 'string',
            minLength: 1,
            maxLength: 128,
            pattern: TOOL_NAME_PATTERN,
            description: 'The tool name exactly as listed (the digest covers it, and calls must use this spelling).',
          },
          server: {
            type: 'string',
            pattern: MCP_SERVER_NAME_PATTERN,
            description: 'The MCP server (the NAME of kars router --mcp-upstream NAME=URL). Absent: any server the policy governs.',
          },
          digest: {
            type: 'string',
            pattern: TOOL_DIGEST_PATTERN,
            description: 'sha256: + 64 lower-case hex: SHA-256 of the RFC 8785 (JCS) JSON of the listed {name, description, inputSchema}.',
          },
        },
      },
    },
    unpinnedTools: {
      type: 'string',
      enum: ['Allow', 'Deny'],
      description:
        'Tools this policy governs but does not pin. Allow (absent means Allow): as without pins. Deny: hidden from tools/list and their calls refused (tool_not_pinned, -32006).',
    },
    enforcement: enforcementSchema('ToolPolicy'),
  },
} as const satisfies JSONSchemaProps;

export const toolPolicyStatusSchema = {
  type: 'object',
  description: 'Written by the controller.',
  properties: {
    ...POLICY_STATUS_PROPERTIES,
    lastCompiledAt: { ...timeStatus, description: 'RFC 3339 UTC time (whole seconds) of the last compile.' },
    agtProfileDigest: { type: 'string', nullable: true, description: 'sha256 canonical digest over agt-profile.yaml.' },
    agtProfileBundleDigest: { type: 'string', description: 'OCI manifest digest of agtProfile.bundleRef; only on the bundle path.' },
    compiledDigest: { type: 'string', nullable: true, description: 'The echoed digest (agtProfileDigest when an AGT profile resolves).' },
    loadedDigest: nullableDigestStatus,
    propagation: propagationSchema,
  },
} as const satisfies JSONSchemaProps;

// ---------------------------------------------------------------------------------------------------------------
// EgressApproval (contract §1.3)

/** The TTL grammar `P[nD][T[nH][nM][nS]]`; "P", "PT" and "P1DT" are excluded by the CEL rule next to it. */
export const TTL_PATTERN = '^P([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+S)?)?$';

/** The hard TTL cap (contract §1.3: the ceiling is never above 7 d), enforced by the CRD at admission. */
export const TTL_HARD_CAP_SECONDS = 7 * 24 * 3600;
const TTL_CAP_MESSAGE = 'ttl must be at most P7D (7 days, the hard cap); the controller ceiling (default 24h) may be lower';

/**
 * A CEL expression for the seconds in a TTL that matches {@link TTL_PATTERN}, using only the Kubernetes
 * strings library (`indexOf`, `substring`) and `int()`, so the same rule runs in kube-apiserver and in
 * kars apiserver. Callers guard it with the pattern and a digit-count bound, so `int()` never overflows.
 */
function ttlSecondsCel(v: string): string {
  const t = `(${v}.contains('T') ? ${v}.substring(${v}.indexOf('T') + 1) : '')`;
  const days = `(${v}.contains('D') ? int(${v}.substring(1, ${v}.indexOf('D'))) : 0)`;
  const hStart = '0';
  const mStart = `(${t}.contains('H') ? ${t}.indexOf('H') + 1 : 0)`;
  const sStart = `(${t}.contains('M') ? ${t}.indexOf('M') + 1 : ${mStart})`;
  const hours = `(${t}.contains('H') ? int(${t}.substring(${hStart}, ${t}.indexOf('H'))) : 0)`;
  const minutes = `(${t}.contains('M') ? int(${t}.substring(${mStart}, ${t}.indexOf('M'))) : 0)`;
  const seconds = `(${t}.contains('S') ? int(${t}.substring(${sStart}, ${t}.indexOf('S'))) : 0)`;
  return `${days} * 86400 + ${hours} * 3600 + ${minutes} * 60 + ${seconds}`;
}

export const egressApprovalSpecSchema = {
  type: 'object',
  description: 'A short-lived, additive widening of one sandbox baseline egress allowlist.',
  required: ['sandbox', 'hosts', 'reason', 'ttl'],
  properties: {
    sandbox: {
      type: 'string',
      minLength: 1,
      maxLength: 253,
      description: 'The KarsSandbox (same namespace) whose egress this widens; the approval stays Pending until it is Running.',
    },
    hosts: {
      type: 'array',
      minItems: 1,
      maxItems: 16,
      items: endpointSchema,
      description:
        '1 to 16 host:port endpoints added to the sandbox baseline while the approval is Active; the router egress proxy admits them until expiresAt (it checks the expiry itself too). Exact names only: wildcards and special addresses (loopback, private, link-local, metadata) open nothing.',
    },
    reason: {
      type: 'string',
      minLength: 1,
      maxLength: 512,
      description: 'Why the access is needed, for audit: 1 to 512 bytes; no control bytes except TAB, LF, CR (checked by the controller).',
      'x-kubernetes-validations': [{ rule: 'size(bytes(self)) <= 512', message: 'reason must be at most 512 bytes (UTF-8)' }],
    },
    ticket: {
      type: 'string',
      minLength: 1,
      maxLength: 128,
      description: 'Optional change or incident ticket, 1 to 128 characters; recorded, not checked.',
    },
    ttl: {
      type: 'string',
      maxLength: 64,
      pattern: TTL_PATTERN,
      description:
        'How long the approval lasts from effectiveAt: ISO 8601 duration P[nD][T[nH][nM][nS]], e.g. PT1H; > 0 and at most the controller ceiling (EGRESS_APPROVAL_MAX_TTL_SECONDS, default 24h, never above 7d). No default.',
      'x-kubernetes-validations': [
        { rule: "self != 'P' && !self.endsWith('T')", message: 'ttl must name at least one unit, e.g. PT1H' },
        { rule: `!self.matches('${TTL_PATTERN}') || !self.matches('[1-9][0-9]{7,}')`, message: TTL_CAP_MESSAGE },
        {
          rule: `!self.matches('${TTL_PATTERN}') || self == 'P' || self.endsWith('T') || self.matches('[1-9][0-9]{7,}') || (${ttlSecondsCel('self')}) > 0`,
          message: 'ttl must be greater than zero',
        },
        {
          rule: `!self.matches('${TTL_PATTERN}') || self.matches('[1-9][0-9]{7,}') || (${ttlSecondsCel('self')}) <= ${TTL_HARD_CAP_SECONDS}`,
          message: TTL_CAP_MESSAGE,
        },
      ],
    },
  },
} as const satisfies JSONSchemaProps;

export const egressApprovalStatusSchema = {
  type: 'object',
  description: 'Written by the controller.',
  properties: {
    phase: {
      type: 'string',
      enum: ['Pending', 'Active', 'Expired'],
      description: 'Pending: not yet confirmed by the sandbox router. Active: the router enforces it. Expired: past expiresAt, removed.',
    },
    observedGeneration: observedGenerationSchema,
    effectiveAt: { ...timeStatus, description: 'Stamped once; never moves.' },
    expiresAt: { ...timeStatus, description: 'effectiveAt + ttl.' },
    mergedDigest: {
      type: 'string',
      description: 'sha256 digest of the merged allowlist (baseline ∪ every active approval of the sandbox) the router must echo.',
    },
    hostCount: { type: 'integer', format: 'int32', minimum: 0, description: 'Number of entries in spec.hosts.' },
    usageCount: { type: 'integer', format: 'int64', minimum: 0, description: 'Reserved; not reported by the router yet.' },
    conditions: conditionsSchema,
    loadedDigest: nullableDigestStatus,
  },
} as const satisfies JSONSchemaProps;

// ---------------------------------------------------------------------------------------------------------------
// KarsSandbox (contract §1.4; the binding subset)

export const karsSandboxSpecSchema = {
  type: 'object',
  description:
    'A sandbox: its policy bindings. A closed schema: any other field is unknown (kubectl apply/create, which validate strictly, refuse it with the field named).',
  properties: {
    inferenceRef: {
      ...nameRefSchema,
      description: 'The InferencePolicy (same namespace) the sandbox router enforces on inference. Absent: no InferencePolicy.',
    },
    governance: {
      type: 'object',
      description: 'Tool governance: which ToolPolicy the router MCP gateway enforces.',
      properties: {
        enabled: { type: 'boolean', description: 'false: no ToolPolicy applies. Absent means enabled.' },
        toolPolicyRef: {
          type: 'object',
          description: 'The ToolPolicy (same namespace).',
          required: ['name'],
          properties: { name: { type: 'string', maxLength: 253, description: 'Empty means the chart default, kars-default.' } },
        },
      },
    },
    memoryRef: { ...nameRefSchema, description: 'A KarsMemory binding. Accepted, not used by this kars.' },
    networkPolicy: {
      type: 'object',
      description: 'Egress.',
      properties: {
        allowedEndpoints: {
          type: 'array',
          items: endpointSchema,
          description:
            'The baseline egress allowlist: the only host:port targets the router egress proxy admits besides active EgressApprovals. Absent or empty: no egress (403).',
        },
        allowlistRef: {
          ...ociRefSchema,
          description: 'A signed egress allowlist bundle. Accepted, not resolved by this kars: the baseline is allowedEndpoints alone.',
        },
      },
    },
  },
} as const satisfies JSONSchemaProps;

export const karsSandboxStatusSchema = {
  type: 'object',
  description: 'Written by the controller.',
  properties: {
    phase: {
      type: 'string',
      enum: ['Pending', 'Running'],
      description: 'Running while at least one router echo Lease is live; Pending otherwise.',
    },
    routers: {
      type: 'array',
      description: 'Router instances whose lease is live.',
      items: {
        type: 'object',
        description: 'One router and what it reports.',
        required: ['instance', 'lastSeen'],
        properties: {
          instance: { type: 'string', minLength: 1, description: 'Router instance name (kars router --instance).' },
          lastSeen: { ...timeStatus, description: 'When what this router reports last changed (its echo Lease renews more often).' },
          loaded: {
            type: 'object',
            additionalProperties: { type: 'string', nullable: true, description: 'sha256 digest, or null.' },
            description:
              'Loaded digest per echoed kind (InferencePolicy, AgtProfile, EgressApproval, …); null: configured, nothing loaded.',
          },
          lastErrors: {
            type: 'object',
            additionalProperties: { type: 'string', description: 'The error message.' },
            description: 'Last load error per kind (a NACK: the previous digest stays loaded).',
          },
        },
      },
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['instance'],
    },
    observedGeneration: observedGenerationSchema,
    conditions: conditionsSchema,
  },
} as const satisfies JSONSchemaProps;

// ---------------------------------------------------------------------------------------------------------------
// Drift assertions: each fails `tsc` unless the schema and the interface describe the same wire shape.

export type _CheckInferencePolicySpec = Assert<SameType<FromSchema<typeof inferencePolicySpecSchema>, InferencePolicySpec>>;
export type _CheckInferencePolicyStatus = Assert<SameType<FromSchema<typeof inferencePolicyStatusSchema>, InferencePolicyStatus>>;
export type _CheckToolPolicySpec = Assert<SameType<FromSchema<typeof toolPolicySpecSchema>, ToolPolicySpec>>;
export type _CheckToolPolicyStatus = Assert<SameType<FromSchema<typeof toolPolicyStatusSchema>, ToolPolicyStatus>>;
export type _CheckEgressApprovalSpec = Assert<SameType<FromSchema<typeof egressApprovalSpecSchema>, EgressApprovalSpec>>;
export type _CheckEgressApprovalStatus = Assert<SameType<FromSchema<typeof egressApprovalStatusSchema>, EgressApprovalStatus>>;
export type _CheckKarsSandboxSpec = Assert<SameType<FromSchema<typeof karsSandboxSpecSchema>, KarsSandboxSpec>>;
export type _CheckKarsSandboxStatus = Assert<SameType<FromSchema<typeof karsSandboxStatusSchema>, KarsSandboxStatus>>;

// ---------------------------------------------------------------------------------------------------------------
// CRD objects

/** One `additionalPrinterColumns` entry. */
export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** The apiextensions.k8s.io/v1 CustomResourceDefinition shape kars emits (one served, stored version). */
export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    scope: 'Namespaced';
    names: { plural: string; singular: string; kind: string; listKind: string; shortNames: string[]; categories: string[] };
    versions: [
      {
        name: string;
        served: true;
        storage: true;
        subresources: { status: Record<string, never> };
        additionalPrinterColumns: PrinterColumn[];
        schema: { openAPIV3Schema: JSONSchemaProps };
      },
    ];
  };
}

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const PHASE: PrinterColumn = { name: 'Phase', type: 'string', jsonPath: '.status.phase' };
/** Ready condition status and reason: a refused (RouterRejected), invalid or waiting object shows why in `kubectl get`. */
const READY: PrinterColumn = { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' };
const REASON: PrinterColumn = { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason' };

function rootSchema(kind: string, spec: JSONSchemaProps, status: JSONSchemaProps): JSONSchemaProps {
  return {
    type: 'object',
    description: `${kind} (kars.azure.com/v1alpha1).`,
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string', description: 'kars.azure.com/v1alpha1.' },
      kind: { type: 'string', description: `${kind}.` },
      // kube-apiserver forbids anything but `type` (and name/generateName) in a CRD's root metadata schema, a description included.
      metadata: { type: 'object' },
      spec,
      status,
    },
  };
}

/** A kars CRD: its names from the resource, the status subresource, and `columns` followed by Age. */
function crd(r: KarsResource, spec: JSONSchemaProps, status: JSONSchemaProps, columns: PrinterColumn[]): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${r.resource}.${r.group}`, labels: { 'app.kubernetes.io/part-of': 'kars' } },
    spec: {
      group: r.group,
      scope: 'Namespaced',
      names: {
        plural: r.resource,
        singular: r.singular,
        kind: r.kind,
        listKind: r.listKind,
        shortNames: [...r.shortNames],
        categories: [KARS_CATEGORY],
      },
      versions: [
        {
          name: r.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [...columns, AGE].map((c) => ({ ...c })),
          // A JSON round trip: no shared subtrees, so callers may mutate one CRD without touching another.
          schema: { openAPIV3Schema: JSON.parse(JSON.stringify(rootSchema(r.kind, spec, status))) as JSONSchemaProps },
        },
      ],
    },
  };
}

/** Phase, Ready and Reason: the columns every policy kind shows of its status. */
const CONDITION_COLUMNS = [PHASE, READY, REASON];

/** A policy kind's columns: its own, then the condition columns, then any that follow them (and Age, from {@link crd}). */
const policyColumns = (own: PrinterColumn[], following: PrinterColumn[] = []): PrinterColumn[] => [
  ...own,
  ...CONDITION_COLUMNS,
  ...following,
];

/** InferencePolicy CRD. Columns: Sandbox, DailyTokens, Phase, Ready, Reason, Age. */
export function inferencePolicyCrd(): CustomResourceDefinition {
  const own: PrinterColumn[] = [
    { name: 'Sandbox', type: 'string', jsonPath: '.spec.appliesTo.sandboxName' },
    { name: 'DailyTokens', type: 'integer', jsonPath: '.spec.tokenBudget.dailyTokens' },
  ];
  return crd(INFERENCE_POLICY, inferencePolicySpecSchema, inferencePolicyStatusSchema, policyColumns(own));
}

/** ToolPolicy CRD. Columns: Tool, DailyCap, Phase, Ready, Reason, Age. */
export function toolPolicyCrd(): CustomResourceDefinition {
  const own: PrinterColumn[] = [
    { name: 'Tool', type: 'string', jsonPath: '.spec.appliesTo.tool' },
    { name: 'DailyCap', type: 'string', jsonPath: '.spec.commerce.dailyCap' },
  ];
  return crd(TOOL_POLICY, toolPolicySpecSchema, toolPolicyStatusSchema, policyColumns(own));
}

/**
 * EgressApproval CRD. Columns: Sandbox, Phase, Ready, Reason, Expires, Hosts, Age.
 * Expires is a `string` column, not `date`: kubectl renders `date` as time elapsed, which is meaningless for a
 * time in the future.
 */
export function egressApprovalCrd(): CustomResourceDefinition {
  const expiresAndHosts: PrinterColumn[] = [
    { name: 'Expires', type: 'string', jsonPath: '.status.expiresAt' },
    { name: 'Hosts', type: 'integer', jsonPath: '.status.hostCount' },
  ];
  const sandbox: PrinterColumn = { name: 'Sandbox', type: 'string', jsonPath: '.spec.sandbox' };
  return crd(EGRESS_APPROVAL, egressApprovalSpecSchema, egressApprovalStatusSchema, policyColumns([sandbox], expiresAndHosts));
}

/** KarsSandbox CRD. Columns: Phase, Inference, Age. */
export function karsSandboxCrd(): CustomResourceDefinition {
  return crd(KARS_SANDBOX, karsSandboxSpecSchema, karsSandboxStatusSchema, [
    PHASE,
    { name: 'Inference', type: 'string', jsonPath: '.spec.inferenceRef.name' },
  ]);
}

/** All four CRDs, fresh objects each call, in the order of {@link KARS_RESOURCES}. */
export function allCrds(): CustomResourceDefinition[] {
  return [inferencePolicyCrd(), toolPolicyCrd(), egressApprovalCrd(), karsSandboxCrd()];
}
