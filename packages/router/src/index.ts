export { MCP_SERVER_NAME, routerCapabilities, startRouter } from './server.js';
export { MCP_TOOLS_PATH, mcpToolsView } from './admin.js';
export type { PolicySourceOptions, RouterOptions, RunningRouter } from './server.js';
export { PolicyState } from './state.js';
export type { PolicyStatusEntry } from './state.js';
export { EMPTY_SNAPSHOT } from './snapshot.js';
export type { AgtRule, EgressEntry, InferenceRules, PolicySnapshot, Severity, SnapshotSource, ToolRules } from './snapshot.js';
export type { LoadOutcome, RouterCapabilities } from '@kars/policy-compiler/runtime';
export { ROUTER_NODE_OPTIONS, tuneRouterHeap, withRouterNodeOptions } from './process-options.js';
