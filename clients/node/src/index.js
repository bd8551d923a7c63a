// agentrpc for Node: spawn the agentrpc server and drive it over JSON-RPC on
// stdio (docs/node.md). Standard library only.

export { Client, DEFAULT_CAPABILITIES, VERSION, cassetteArgs, decisionOf } from './client.js';
export { Session, TurnStream } from './session.js';
export { tool, isTool, ok, failed, denied, conflict } from './tools.js';
export { ops, newId } from './ops.js';
export { findBinary, repoBuildCandidates, ENV_VAR, BINARY_NAME, PACKAGED_BINARY } from './discovery.js';
export { PROTOCOL_VERSION, METHODS, EVENT_TYPES, ERROR_TABLE } from './generated/protocol.js';
export * from './errors.js';

/**
 * An inline model on the offline scripted provider (docs/protocol.md §15):
 * each item is one model round trip (`{text: [...]}`, `{toolCalls: [...]}`,
 * `{stall: true}`, `{error: {code}}`, ...). A deterministic stand-in for tests
 * and offline demos, not a language model.
 */
export function scripted(...items) {
  return { provider: 'scripted', model: 'scripted', script: items };
}
