/** A realistic CRD schema fixture: an agent sandbox policy with a token budget. */
export function policySchema(): Record<string, unknown> {
  return {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        required: ['agent'],
        properties: {
          agent: { type: 'string', minLength: 1, maxLength: 63, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' },
          mode: { type: 'string', enum: ['enforce', 'audit'], default: 'enforce' },
          tokenBudget: {
            type: 'object',
            properties: {
              daily: { type: 'integer', minimum: 0 },
              monthly: { type: 'integer', minimum: 0, default: 100000 },
            },
            'x-kubernetes-validations': [{ rule: 'self.daily <= self.monthly', message: 'daily must not exceed monthly' }],
          },
          egress: {
            type: 'array',
            maxItems: 4,
            'x-kubernetes-list-type': 'map',
            'x-kubernetes-list-map-keys': ['host'],
            items: {
              type: 'object',
              required: ['host'],
              properties: {
                host: { type: 'string' },
                port: { 'x-kubernetes-int-or-string': true, default: 443 },
                protocol: { type: 'string', default: 'TCP' },
              },
            },
          },
          tools: { type: 'array', 'x-kubernetes-list-type': 'set', items: { type: 'string' } },
          labels: { type: 'object', additionalProperties: { type: 'string', maxLength: 10 } },
          limits: {
            type: 'object',
            additionalProperties: { type: 'object', properties: { cpu: { type: 'number' }, burst: { type: 'integer', default: 1 } } },
          },
          extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true, properties: { known: { type: 'string' } } },
          template: {
            type: 'object',
            'x-kubernetes-embedded-resource': true,
            properties: { spec: { type: 'object', properties: { image: { type: 'string' } } } },
          },
          owner: {
            type: 'string',
            'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'owner is immutable' }],
          },
        },
      },
      status: { type: 'object', properties: { used: { type: 'integer' } } },
    },
  };
}

/** A valid policy object (after defaulting). */
export function validPolicy(): Record<string, unknown> {
  return {
    apiVersion: 'kars.dev/v1',
    kind: 'AgentPolicy',
    metadata: { name: 'p1', namespace: 'default' },
    spec: { agent: 'coder', tokenBudget: { daily: 10, monthly: 100 }, owner: 'alice' },
  };
}
