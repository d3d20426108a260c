/**
 * @kars/policy-api: the kars.azure.com/v1alpha1 kinds (types, CRDs, generated YAML), semantic validation shared by
 * the controller and the CLI, and the router echo contract. No I/O at import time.
 */
export * from './types.js';
export * from './schema-types.js';
export * from './crds.js';
export * from './crd-yaml.js';
export * from './validate.js';
export * from './echo.js';
export * from './heartbeat.js';
export * from './egress-host.js';
export * from './tool-pin.js';
export * from './dry-run.js';
