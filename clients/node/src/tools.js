// Tools: a spec the server sends to the model, plus the function this client
// runs when the server sends `tool/call` for it (docs/protocol.md §5).
//
// What `run` returns decides the outcome the model sees:
//  - a plain JSON value → `ok` with that content;
//  - `{content, undo}` where `undo` is a function → `ok`, and `undo()` runs if
//    the turn fails and the server rolls the call back (`tool/undo`);
//  - `failed(content)`, `denied(reason)`, `conflict(content)` → that outcome,
//    `ok(content, {undo})` → `ok` spelled out.
// A thrown error is different: the client answers `tool/call` with a JSON-RPC
// error, which ends the turn with ToolExecutorError (its `cause` is what was
// thrown). Return `failed(...)` when the model should see the problem and go on.

const OUTCOME = Symbol('agentrpc.outcome');
const TOOL = Symbol('agentrpc.tool');

/**
 * Defines a tool.
 * @template A, R
 * @param {{name: string, description?: string, inputSchema?: object, confirmation?: 'never'|'always',
 *          annotations?: object, final?: boolean, parallel?: boolean,
 *          run: (args: A, ctx: object) => R | Promise<R>}} definition
 */
export function tool(definition) {
  if (!definition || typeof definition !== 'object') throw new TypeError('tool() takes {name, description, inputSchema, run}');
  const { run, ...spec } = definition;
  if (typeof spec.name !== 'string' || !spec.name) throw new TypeError('tool() needs a non-empty name');
  if (typeof run !== 'function') throw new TypeError(`tool ${JSON.stringify(spec.name)} needs a run(args, ctx) function`);
  // parallel: false says run() is not safe beside other calls: the server runs its calls one at a time
  // (default: a tool annotated readOnly may run in parallel; docs/protocol.md §5).
  if (spec.parallel !== undefined && typeof spec.parallel !== 'boolean') {
    throw new TypeError(`tool ${JSON.stringify(spec.name)}: parallel must be true or false`);
  }
  if (spec.inputSchema === undefined) spec.inputSchema = { type: 'object', properties: {} };
  return Object.freeze({ [TOOL]: true, name: spec.name, spec: Object.freeze(spec), run });
}

/** True for a value made by tool(). */
export function isTool(value) {
  return Boolean(value && value[TOOL]);
}

function outcome(kind, content, undo) {
  if (undo !== undefined && typeof undo !== 'function') throw new TypeError('undo must be a function');
  return Object.freeze({ [OUTCOME]: kind, content, undo });
}

/** Outcome `ok` with `content`; `undo` rolls the call back if the turn fails. */
export function ok(content, { undo } = {}) { return outcome('ok', content, undo); }
/** Outcome `failed`: the model sees `content` and may try again. */
export function failed(content) { return outcome('failed', content); }
/** Outcome `denied`: the tool refused; the model sees `reason`. */
export function denied(reason) { return outcome('denied', reason); }
/** Outcome `conflict`: the world changed under the call (e.g. a stale edit). */
export function conflict(content) { return outcome('conflict', content); }

/**
 * What `run` returned, as `{outcome, content, undo?}` with `undo` still a function.
 * @returns {{outcome: string, content: unknown, undo?: Function}}
 */
export function toolOutcome(value) {
  if (value && typeof value === 'object' && value[OUTCOME]) {
    return { outcome: value[OUTCOME], content: value.content ?? null, undo: value.undo };
  }
  if (value && typeof value === 'object' && typeof value.undo === 'function') {
    return { outcome: 'ok', content: value.content ?? null, undo: value.undo };
  }
  return { outcome: 'ok', content: value === undefined ? null : value };
}

/** Separates tool() values (spec + function) from plain specs. */
export function splitTools(tools) {
  const specs = [];
  const functions = new Map();
  for (const item of tools) {
    if (isTool(item)) {
      specs.push(item.spec);
      functions.set(item.name, item);
    } else if (item && typeof item === 'object') {
      specs.push(item);
    } else {
      throw new TypeError(`tools must be tool({...}) values or ToolSpec objects, not ${JSON.stringify(item)}`);
    }
  }
  return { specs, functions };
}
