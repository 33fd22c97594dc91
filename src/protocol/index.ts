/** SBX2: the session agent's wire protocol. Pure encode/decode, no I/O. */
export * from './errors.js';
export * from './frame.js';
export * from './limits.js';
export * from './messages.js';
export * from './secure-channel.js';
