export * from './types.js';
export * from './errors.js';
export * from './selectors.js';
export * from './clock.js';
export * from './logger.js';
export * from './codes.js';
export * from './json.js';
export * from './http.js';
