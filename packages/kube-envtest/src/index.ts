export * from './versions.js';
export * from './binaries.js';
export * from './pki.js';
export * from './process.js';
export * from './http.js';
export * from './control-plane.js';
export * from './testing.js';
