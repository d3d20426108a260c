export { PolicyController } from './manager.js';
export type { LeaderElectionSettings, PolicyControllerOptions } from './manager.js';
export { awaitingMessage, conditionsFor, decideEnforcement, phaseFor, shouldWarn, withTransitions } from './enforcement.js';
export type { EnforcementState, SandboxEcho } from './enforcement.js';
