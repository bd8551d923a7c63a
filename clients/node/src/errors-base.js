// The hand-written roots of the error hierarchy. The class of each wire error
// kind is generated (src/generated/errors.js) and extends one of these.
//
// Two families share one root, AgentRPCException:
//  - AgentRPCError and its subclasses are JSON-RPC error *answers*
//    (docs/protocol.md §13), chosen by `error.data.kind`, never by the message;
//  - ClientError and its subclasses are local failures: the server exited, a
//    request timed out, the binary was not found.

/** Root of everything this package throws, so one `instanceof` catches all. */
export class AgentRPCException extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * A JSON-RPC error answer: `{code, message, data: {kind, ...}}`. Used as-is for a
 * kind and code this client does not know, so a newer server never breaks it.
 * Handlers of server requests may throw it (or a subclass) to answer with it.
 */
export class AgentRPCError extends AgentRPCException {
  /** The `data.kind` a subclass stands for (`undefined` here). */
  static kind = undefined;
  /** The JSON-RPC code a subclass stands for (`undefined` here). */
  static code = undefined;

  /**
   * @param {number} code
   * @param {string} message
   * @param {Record<string, unknown>} [data]
   */
  constructor(code, message, data = {}) {
    super(message);
    /** @type {number} */
    this.code = code;
    /** @type {Record<string, unknown>} */
    this.data = { ...data };
  }

  /** The stable, machine-readable name (`data.kind`), or undefined. */
  get kind() {
    return typeof this.data.kind === 'string' ? this.data.kind : undefined;
  }

  /** The turn this error ended, when it ended one. */
  get turnId() {
    return typeof this.data.turnId === 'string' ? this.data.turnId : undefined;
  }

  /** Text the model had streamed before the turn failed or was cancelled. */
  get partialText() {
    return typeof this.data.partialText === 'string' ? this.data.partialText : undefined;
  }

  /** The JSON-RPC `error` member for this error. */
  toJSON() {
    // `data` is optional in JSON-RPC: an error that had none goes back without one.
    return Object.keys(this.data).length
      ? { code: this.code, message: this.message, data: { ...this.data } }
      : { code: this.code, message: this.message };
  }
}

/** Base of the three per-turn limit errors; not a wire kind of its own. */
export class RunLimitExceededError extends AgentRPCError {
  /** The configured limit that was exceeded (seconds for the wall clock). */
  get limit() {
    return typeof this.data.limit === 'number' ? this.data.limit : undefined;
  }
}

/** Accessors of `providerError`: what the server says to do next. */
export class ProviderErrorBase extends AgentRPCError {
  /** The raw `data.provider` object (`{}` if absent). */
  get provider() {
    const p = this.data.provider;
    return p && typeof p === 'object' ? p : {};
  }

  /** `rateLimited`, `authExpired`, `contextLengthExceeded`, ... */
  get providerCode() {
    return typeof this.provider.code === 'string' ? this.provider.code : undefined;
  }

  /** The provider's HTTP status, when there was one. */
  get httpStatus() {
    return Number.isInteger(this.provider.httpStatus) ? this.provider.httpStatus : undefined;
  }

  /** `{kind: "retryWithBackoff" | "refreshAuthThenRetry" | "none", afterSeconds?}`. */
  get retryGuidance() {
    const g = this.provider.retryGuidance;
    if (!g || typeof g !== 'object' || typeof g.kind !== 'string') return { kind: 'none' };
    return typeof g.afterSeconds === 'number' ? { kind: g.kind, afterSeconds: g.afterSeconds } : { kind: g.kind };
  }

  /** True when retrying the same request may succeed. */
  get isRetryable() {
    return this.provider.isRetryable === true;
  }

  /** True when a person must act first (bad credentials, no entitlement). */
  get requiresUserAction() {
    return this.provider.requiresUserAction === true;
  }

  /** A description fit to show an end user. */
  get safeDescription() {
    return typeof this.provider.safeDescription === 'string' ? this.provider.safeDescription : undefined;
  }
}

/**
 * Accessors of `toolExecutorError`: the client answered a `tool/call` with an
 * error. When the failing tool was a function of this client, `cause` is what
 * it threw.
 */
export class ToolExecutorErrorBase extends AgentRPCError {
  /** The tool call that failed. */
  get callId() {
    return typeof this.data.callId === 'string' ? this.data.callId : undefined;
  }

  /** The name of the tool that failed. */
  get toolName() {
    return typeof this.data.name === 'string' ? this.data.name : undefined;
  }

  /** The error the client answered `tool/call` with, decoded. */
  get clientError() {
    const e = this.data.clientError;
    return e && typeof e === 'object' ? errorFromWire(e) : undefined;
  }
}

const byKind = new Map();
const byCode = new Map();

/** Makes the generated classes known to errorFromWire (src/errors.js does it once). */
export function registerErrorClasses(classes) {
  for (const cls of classes) {
    byKind.set(cls.kind, cls);
    // The first class of a code is its most general one (table order).
    if (!byCode.has(cls.code)) byCode.set(cls.code, cls);
  }
}

/** The class for an error: by kind, else by code, else AgentRPCError. */
export function errorClassFor(code, kind) {
  return (typeof kind === 'string' && byKind.get(kind)) || byCode.get(code) || AgentRPCError;
}

/**
 * Decodes a JSON-RPC `error` member into the matching class. A malformed member
 * (a peer bug) becomes an AgentRPCError that says so instead of throwing.
 * @param {unknown} error
 * @returns {AgentRPCError}
 */
export function errorFromWire(error) {
  if (!error || typeof error !== 'object' || Array.isArray(error)) {
    return new AgentRPCError(-32603, `malformed error object: ${JSON.stringify(error)?.slice(0, 200)}`);
  }
  const code = Number.isInteger(error.code) ? error.code : -32603;
  const message = typeof error.message === 'string' ? error.message : '';
  let data = {};
  if (error.data && typeof error.data === 'object' && !Array.isArray(error.data)) data = { ...error.data };
  else if (error.data !== undefined) data = { value: error.data };
  const cls = errorClassFor(code, data.kind);
  if (cls === AgentRPCError) return new AgentRPCError(code, message, data);
  // The wire's kind wins over the class's (a newer kind of a known code).
  const err = new cls(message, data);
  err.code = code;
  if (data.kind === undefined) delete err.data.kind;
  return err;
}

/** A failure on this side of the connection, not an answer from the server. */
export class ClientError extends AgentRPCException {}

/**
 * The connection is closed: no request can be sent or answered. Every pending
 * request ends with it when the connection goes away, so no caller hangs.
 */
export class ConnectionClosedError extends ClientError {
  /**
   * @param {string} message
   * @param {{exitCode?: number|null, signal?: string|null, stderrTail?: string}} [info]
   */
  constructor(message, { exitCode = null, signal = null, stderrTail = '' } = {}) {
    let text = message;
    if (exitCode !== null) text += ` (exit code ${exitCode})`;
    else if (signal) text += ` (killed by ${signal})`;
    if (stderrTail) text += `\n--- server stderr (tail) ---\n${stderrTail.replace(/\n$/, '')}`;
    super(text);
    /** Why the connection closed, without the exit code and stderr. */
    this.reason = message;
    /** The server's exit code, when it exited normally. */
    this.exitCode = exitCode;
    /** The signal that ended the server, when one did. */
    this.signal = signal;
    /** The server's last stderr lines, which usually say why. */
    this.stderrTail = stderrTail;
  }
}

/** The server process exited (or closed its stdout) while the client was open. */
export class ServerExitedError extends ConnectionClosedError {}

/** A request got no answer in time; it was withdrawn with `$/cancelRequest`. */
export class RequestTimeoutError extends ClientError {
  constructor(method, timeoutMs, requestId) {
    super(`request ${JSON.stringify(method)} (id ${requestId}) got no answer within ${timeoutMs} ms`);
    this.method = method;
    this.timeoutMs = timeoutMs;
    this.requestId = requestId;
  }
}

/** No agentrpc binary was found; `searched` lists every place tried. */
export class BinaryNotFoundError extends ClientError {
  /** @param {string[]} searched */
  constructor(searched) {
    super('could not find the agentrpc server binary; looked in:\n' +
      searched.map((s) => `  - ${s}`).join('\n') +
      '\nPass {binary}, set AGENTRPC_BIN, put agentrpc on PATH, or run `swift build`.');
    this.searched = [...searched];
  }
}
