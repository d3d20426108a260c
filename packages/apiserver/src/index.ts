export { ApiServer, parseListen } from './server.js';
export type { ApiServerOptions, FaultInjector, LogFn } from './server.js';
