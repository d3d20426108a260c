export { Backoff, backoffDelayMs } from './backoff.js';
// The Clock and Logger live in @kars/kube-core (ADR 0016); re-exported for runtime users.
export { FakeClock, silentLogger, sleep, systemClock } from '@kars/kube-core';
export type { Clock, Logger, LogFields, LogLevel, Timer, TimerOptions } from '@kars/kube-core';
export { Controller, TerminalError, trigger } from './controller.js';
export type { ControllerHandle, ControllerOptions, ReconcileContext, ReconcileResult, Trigger } from './controller.js';
export { startHealthServer } from './health.js';
export type { HealthServer, HealthServerOptions, ReadinessCheck } from './health.js';
export { LeaderElectionError, LeaderElector, leaderElectionEnabled } from './leader.js';
export type { Lease, LeaseApi, LeaderElectionErrorCode, LeaderElectionOptions } from './leader.js';
export { leaseApi } from './lease-api.js';
export { RuntimeMetrics, WATCH_RESTART_REASONS } from './metrics.js';
export type { ControllerMetrics, WatchMetrics, WatchRestartReason } from './metrics.js';
export { compareResourceVersions, OwnWrites } from './own-writes.js';
export type { OwnWritesOptions } from './own-writes.js';
export { exponentialRateLimiter, WorkQueue } from './queue.js';
export type { RateLimiter, WorkQueueOptions } from './queue.js';
export { dropManagedFields, Reflector } from './reflector.js';
export type { ReflectorHandle, ReflectorOptions, RuntimeLogger } from './reflector.js';
export { keyOf, splitKey, Store } from './store.js';
export type { Change, ChangeSource, IndexFn, StoreReader } from './store.js';
export { DEFAULT_WATCH_CONFIG, detectionBoundMs, watchConfigFromEnv, watchTimeoutSeconds } from './watch-config.js';
export type { WatchConfig } from './watch-config.js';
export {
  classifyFailure,
  errorEventOutcome,
  IMMEDIATE_END_MS,
  INITIAL_WATCHER_STATE,
  MIN_HEALTHY_WATCH_MS,
  relistInMs,
  retryAfterMs,
  shouldResetBackoff,
  step,
  watcher,
  runWatcher,
  stepEvent,
  watcherBatches,
} from './watcher.js';
export type {
  BackoffState,
  RelistReason,
  StepContext,
  StepResult,
  StreamOutcome,
  WatchClient,
  WatcherEvent,
  WatcherInput,
  WatcherOptions,
  WatcherState,
  WatcherTiming,
} from './watcher.js';
export { eventLoopWatchdog, reconcileWatchdog } from './watchdog.js';
export type { ActivitySource, EventLoopWatchdogOptions, LivenessCheck, ReconcileWatchdogOptions } from './watchdog.js';
