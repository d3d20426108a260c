export { ApiServer } from './server.js';
export type { ApiServerOptions, FaultInjector } from './server.js';
export type { AuditRecord, AuthorizationMode } from './auth/authorizer.js';
export type { PolicyRule, RequestAttributes, UserInfo } from './auth/rbac.js';
export { ruleAllows } from './auth/rbac.js';
export { DEFAULT_MAX_BATCH } from './storage/store.js';
export { DataDirLock, DataDirLockedError, DIR_LOCK_FILE } from './storage/dir-lock.js';
export type { DirLockHolder, DirLockOptions } from './storage/dir-lock.js';
