/** The suite's own CRDs: one namespaced with most schema features, one cluster-scoped and plain. */

const gadgetSchema = {
  type: 'object',
  properties: {
    spec: {
      type: 'object',
      required: ['size'],
      'x-kubernetes-validations': [
        { rule: 'self.size <= self.max', message: 'size must not exceed max' },
        { rule: '!has(oldSelf.mode) || self.mode == oldSelf.mode || oldSelf.mode != "locked"', message: 'a locked mode stays locked' },
      ],
      properties: {
        size: { type: 'integer', minimum: 0 },
        max: { type: 'integer', default: 10 },
        mode: { type: 'string', enum: ['open', 'locked', 'auto'], default: 'open' },
        name: { type: 'string', maxLength: 8, pattern: '^[a-z]+$' },
        tags: { type: 'array', maxItems: 3, items: { type: 'string' } },
        ports: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
          items: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, port: { type: 'integer' } } },
        },
        free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        immutable: { type: 'string', 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'immutable is immutable' }] },
        port: { 'x-kubernetes-int-or-string': true },
      },
    },
    status: {
      type: 'object',
      properties: { phase: { type: 'string' }, count: { type: 'integer' } },
    },
  },
};

export const SUITE_CRDS: unknown[] = [
  {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'gadgets.diff.example.com' },
    spec: {
      group: 'diff.example.com',
      scope: 'Namespaced',
      names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget', listKind: 'GadgetList', shortNames: ['gd'], categories: ['diff'] },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
            { name: 'Mode', type: 'string', jsonPath: '.spec.mode', priority: 1 },
            { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
          schema: { openAPIV3Schema: gadgetSchema },
        },
        { name: 'v2', served: true, storage: false, subresources: { status: {} }, schema: { openAPIV3Schema: gadgetSchema } },
      ],
    },
  },
  {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'knobs.diff.example.com' },
    spec: {
      group: 'diff.example.com',
      scope: 'Cluster',
      names: { plural: 'knobs', singular: 'knob', kind: 'Knob' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: { type: 'object', properties: { level: { type: 'integer' }, note: { type: 'string' } } } },
            },
          },
        },
      ],
    },
  },
];
