// The JSON-RPC connection to one agentrpc server process (docs/protocol.md).
//
// Client matches answers to requests, dispatches the server's notifications
// and requests (tool calls, undo, confirmations), and guarantees that no
// caller waits forever: every pending request ends with an answer, a
// RequestTimeoutError, or a ConnectionClosedError / ServerExitedError when the
// connection goes away.

import { randomUUID } from 'node:crypto';
import { findBinary } from './discovery.js';
import {
  AgentRPCError,
  ConnectionClosedError,
  InternalError,
  InvalidParamsError,
  MethodNotFoundError,
  RequestTimeoutError,
  ServerExitedError,
  ToolExecutorError,
  errorFromWire,
} from './errors.js';
import { PROTOCOL_VERSION } from './generated/protocol.js';
import { Session } from './session.js';
import { splitTools, toolOutcome } from './tools.js';
import { ProcessTransport, delay } from './transport.js';

/** This package's version (also in package.json; a test keeps them equal). */
export const VERSION = '0.1.0';

/**
 * Capabilities sent by default: this client runs tools and receives
 * confirmations as `confirmationRequested` events (answered with
 * `session/confirm`, by an `onConfirm` handler or by the caller).
 */
export const DEFAULT_CAPABILITIES = Object.freeze({ tools: true, confirmations: 'notify' });

/** How long an aborted request waits for the server's `-32800` before rejecting anyway. */
const CANCEL_GRACE_MS = 5000;
/** How long a request whose write failed waits for the connection loss that explains it. */
const WRITE_FAILURE_GRACE_MS = 3000;

/**
 * A connection to one agentrpc server process. Create it with
 * `await Client.spawn()`; requests may be issued concurrently.
 */
export class Client {
  #transport;
  #nextId = 0;
  /** @type {Map<number, {method: string, resolve: Function, reject: Function}>} */
  #pending = new Map();
  /** @type {Map<string, Set<Function>>} */
  #listeners = new Map();
  /** @type {Map<string, Function>} */
  #handlers = new Map();
  /** @type {Map<string, Session>} */
  #sessions = new Map();
  /**
   * Undo functions by the opaque token sent to the server. Kept after their turn
   * ends, because `session/rewind` may undo committed turns; forgotten when they
   * run or when the session is closed or deleted.
   */
  #undo = new Map();
  /** Server→client requests being handled, by the server's id. */
  #inbound = new Map();
  /** What client-side tools threw, by session then call id (for ToolExecutorError.cause). */
  #toolErrors = new Map();
  /** Subscribers to session events: {sessionId, push(event), end()}. */
  #subscribers = new Set();
  #closedError = null;
  #closing = false;
  #closePromise = null;
  #connectionLost;
  #markLost;

  /**
   * Wraps a started transport; most callers want `Client.spawn()`.
   * @param {ProcessTransport} transport
   * @param {object} [options]
   */
  constructor(transport, { requestTimeout, shutdownTimeout = 5000, onConfirm, onAsk, onElicitation } = {}) {
    this.#transport = transport;
    /** Default timeout (ms) of every request; undefined waits as long as the server takes. */
    this.requestTimeout = requestTimeout;
    this.shutdownTimeout = shutdownTimeout;
    /** Decides tool calls that need confirmation, for sessions without their own. */
    this.onConfirm = onConfirm;
    /** Answers `user/ask` (the model's ask_user tool) for sessions without their own. */
    this.onAsk = onAsk;
    /** Fills in an MCP server's form (`user/elicit`): returns the values, or 'decline' / 'cancel'. */
    this.onElicitation = onElicitation;
    /** The `initialize` result, once the handshake succeeded. */
    this.initializeResult = undefined;
    this.#connectionLost = new Promise((resolve) => { this.#markLost = resolve; });
  }

  /**
   * Starts a server and runs the `initialize` handshake.
   * @param {import('./index.js').SpawnOptions} [options]
   * @returns {Promise<Client>}
   */
  static async spawn(options = {}) {
    let { args = [] } = options;
    const {
      binary, env, inheritEnv = true, cwd, stderr = 'collect', stderrTailLines = 200,
      maxFrameBytes = 256 * 1024 * 1024, capabilities, clientInfo, initialize = true, cassette, ...rest
    } = options;
    const command = findBinary(binary);
    args = [...args, ...cassetteArgs(cassette)];
    const environment = inheritEnv ? { ...process.env, ...(env ?? {}) } : { ...(env ?? {}) };
    /** @type {Client} */
    let client;
    const transport = new ProcessTransport({
      command, args: [...args], env: environment, cwd, stderr, stderrTailLines, maxFrameBytes,
      onLine: (line) => client.#onLine(line),
      onClose: (info) => client.#onTransportClosed(info),
    });
    client = new Client(transport, rest);
    try {
      await transport.spawned;
    } catch (error) {
      throw new ConnectionClosedError(`could not start ${command}: ${error.message}`);
    }
    if (initialize) {
      // A client that can answer questions says so; a session may then offer ask_user.
      // One that can fill in MCP servers' forms says so too; agentrpc then tells its servers.
      let declared = capabilities ?? (rest.onAsk ? { ...DEFAULT_CAPABILITIES, askUser: true } : undefined);
      if (!capabilities && rest.onElicitation) declared = { ...(declared ?? DEFAULT_CAPABILITIES), elicitation: true };
      try {
        await client.initialize({ capabilities: declared, clientInfo });
      } catch (error) {
        await client.close();
        throw error;
      }
    }
    return client;
  }

  /** `await using client = await Client.spawn()` closes it on scope exit. */
  async [Symbol.asyncDispose]() {
    await this.close();
  }

  /**
   * Sends `initialize`; must be the first request (docs/protocol.md §2).
   * @returns {Promise<import('./generated/wire.js').InitializeResult>}
   */
  async initialize({ capabilities, clientInfo } = {}) {
    const result = await this.request('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo: clientInfo ?? { name: 'agentrpc-node', version: VERSION },
      capabilities: capabilities ?? { ...DEFAULT_CAPABILITIES },
    });
    if (!result || typeof result !== 'object') throw new InternalError(`initialize returned ${JSON.stringify(result)}`);
    this.initializeResult = result;
    return result;
  }

  /** True once `initialize` succeeded. */
  get initialized() { return this.initializeResult !== undefined; }
  /** `serverInfo` from the handshake. */
  get serverInfo() { return this.initializeResult?.serverInfo; }
  /** `capabilities` from the handshake. */
  get serverCapabilities() { return this.initializeResult?.capabilities; }
  /** The protocol version the server answered with. */
  get protocolVersion() { return this.initializeResult?.protocolVersion; }
  /** The server's process id. */
  get pid() { return this.#transport.pid; }
  /** The server's exit code once it exited (null while running or when a signal ended it). */
  get exitCode() { return this.#transport.exitCode; }
  /** The server's most recent stderr lines (bounded). */
  get stderrTail() { return this.#transport.stderrTail; }
  /** How many writes waited for stdin to drain (back-pressure seen). */
  get drainWaits() { return this.#transport.drainWaits; }
  /** True once the connection is gone (closed by us or by the server). */
  get closed() { return this.#closedError !== null; }
  /** Resolves when the connection is gone; with `timeoutMs`, false if it was not by then. */
  async waitClosed(timeoutMs) {
    if (timeoutMs === undefined) { await this.#connectionLost; return true; }
    return Promise.race([this.#connectionLost.then(() => true), delay(timeoutMs).then(() => false)]);
  }

  // -- requests --------------------------------------------------------------

  /**
   * Sends a request and resolves with its `result`. Rejects with the
   * AgentRPCError subclass of an error answer, RequestTimeoutError after
   * `timeout` ms, or ConnectionClosedError. An aborted `signal` withdraws the
   * request with `$/cancelRequest`; the promise then settles with the server's
   * answer (a turn rejects with CancelledError, whose `cause` is the signal's
   * reason), or with the reason itself if none comes within 5 s.
   * @param {string} method
   * @param {unknown} [params]
   * @param {{signal?: AbortSignal, timeout?: number}} [options]
   */
  request(method, params, { signal, timeout = this.requestTimeout } = {}) {
    if (this.#closedError) return Promise.reject(this.#closedCopy());
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = ++this.#nextId;
    const message = { jsonrpc: '2.0', id, method };
    if (params !== undefined) message.params = params;
    let text;
    try {
      text = JSON.stringify(message);
    } catch (error) {
      return Promise.reject(new TypeError(`params of ${method} are not JSON: ${error.message}`));
    }
    return new Promise((resolve, reject) => {
      let timer;
      let graceTimer;
      const cleanup = () => {
        this.#pending.delete(id);
        clearTimeout(timer);
        clearTimeout(graceTimer);
        signal?.removeEventListener('abort', onAbort);
      };
      const entry = {
        method,
        resolve: (value) => { cleanup(); resolve(value); },
        reject: (error) => {
          cleanup();
          if (signal?.aborted && error instanceof AgentRPCError && error.cause === undefined) {
            Object.defineProperty(error, 'cause', { value: signal.reason, configurable: true, writable: true });
          }
          reject(error);
        },
      };
      const onAbort = () => {
        this.#sendCancelRequest(id);
        graceTimer = setTimeout(() => entry.reject(signal.reason), CANCEL_GRACE_MS);
        graceTimer.unref?.();
      };
      this.#pending.set(id, entry);
      if (timeout !== undefined && timeout !== null) {
        timer = setTimeout(() => {
          this.#sendCancelRequest(id);
          entry.reject(new RequestTimeoutError(method, timeout, id));
        }, timeout);
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#transport.write(text).catch((error) => {
        // A failed write (EPIPE) usually means the server is exiting: the loss of
        // the connection then rejects this request with the exit code, which says
        // more than the write error, so that one only wins if nothing follows.
        if (this.#closedError) entry.reject(this.#closedCopy());
        else setTimeout(() => entry.reject(error), WRITE_FAILURE_GRACE_MS).unref?.();
      });
    });
  }

  /** Sends a notification (no answer). */
  async notify(method, params) {
    if (this.#closedError) throw this.#closedCopy();
    const message = { jsonrpc: '2.0', method };
    if (params !== undefined) message.params = params;
    await this.#transport.write(JSON.stringify(message));
  }

  #sendCancelRequest(id) {
    if (this.#closedError || !this.#pending.has(id)) return;
    this.notify('$/cancelRequest', { id }).catch(() => {});
  }

  #closedCopy() {
    const e = this.#closedError;
    const Cls = e.constructor;
    return new Cls(e.reason, { exitCode: e.exitCode, signal: e.signal, stderrTail: e.stderrTail });
  }

  // -- notifications and server requests ---------------------------------------

  /**
   * Calls `listener(params)` for each `method` notification. Exceptions are
   * swallowed: one faulty listener must not kill the connection.
   * @returns {() => void} unsubscribes
   */
  onNotification(method, listener) {
    let set = this.#listeners.get(method);
    if (!set) this.#listeners.set(method, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /**
   * Answers the server's `method` requests with `handler(params, {signal, id})`.
   * Throwing an AgentRPCError answers with it; any other error answers
   * `-32603`. The server's `$/cancelRequest` aborts `signal` and answers
   * `-32800`. One handler per method.
   * @returns {() => void} removes it (if it is still the registered one)
   */
  onRequest(method, handler) {
    this.#handlers.set(method, handler);
    return () => { if (this.#handlers.get(method) === handler) this.#handlers.delete(method); };
  }

  /** @internal Subscribes to events of one session; used by Session. */
  _subscribe(sessionId, push, end) {
    const sub = { sessionId, push, end };
    this.#subscribers.add(sub);
    if (this.#closedError) queueMicrotask(end);
    return () => this.#subscribers.delete(sub);
  }

  #onLine(line) {
    let message;
    try {
      message = JSON.parse(line.toString('utf8'));
    } catch {
      return; // not JSON: a server bug; nothing can be matched to it
    }
    for (const item of Array.isArray(message) ? message : [message]) {
      if (item && typeof item === 'object') this.#onMessage(item);
    }
  }

  #onMessage(message) {
    if (typeof message.method === 'string') {
      if (message.id !== undefined && message.id !== null) this.#onServerRequest(message.id, message.method, message.params);
      else this.#onNotification(message.method, message.params);
      return;
    }
    if ('result' in message || 'error' in message) {
      const entry = this.#pending.get(message.id);
      if (!entry) return; // withdrawn or unknown
      if ('error' in message) entry.reject(errorFromWire(message.error));
      else entry.resolve(message.result);
    }
  }

  #onNotification(method, params) {
    if (method === '$/cancelRequest') this.#inbound.get(params?.id)?.abort();
    else if (method === 'session/event' && params && typeof params === 'object' && params.event) {
      const event = { ...params.event, sessionId: params.sessionId, turnId: params.turnId, seq: params.seq };
      for (const sub of [...this.#subscribers]) if (sub.sessionId === params.sessionId) sub.push(event);
      if (event.type === 'confirmationRequested') this.#autoConfirm(event);
    }
    for (const listener of [...(this.#listeners.get(method) ?? [])]) {
      try {
        const out = listener(params);
        if (out && typeof out.then === 'function') out.then(undefined, () => {});
      } catch { /* see onNotification */ }
    }
  }

  #onServerRequest(id, method, params) {
    const handler = this.#builtinHandler(method, params) ?? this.#handlers.get(method);
    if (!handler) {
      const what = method === 'tool/call'
        ? `no function is registered for tool ${JSON.stringify(params?.name)} in session ${JSON.stringify(params?.sessionId)} on this client`
        : `the client does not handle ${JSON.stringify(method)}`;
      this.#answer(id, { error: new MethodNotFoundError(what, { method }).toJSON() });
      return;
    }
    const controller = new AbortController();
    this.#inbound.set(id, controller);
    let answered = false;
    const finish = (reply) => {
      if (answered) return;
      answered = true;
      if (this.#inbound.get(id) === controller) this.#inbound.delete(id);
      this.#answer(id, reply);
    };
    controller.signal.addEventListener('abort', () => {
      // Withdrawn by the server: answer at once; the handler's later result is dropped.
      if (!this.#closedError) finish({ error: { code: -32800, message: 'request cancelled by the server', data: { kind: 'cancelled' } } });
    }, { once: true });
    Promise.resolve()
      .then(() => handler(params, { signal: controller.signal, id }))
      .then(
        (result) => finish({ result: result === undefined ? null : result }),
        (error) => finish({ error: error instanceof AgentRPCError ? error.toJSON()
          : new InternalError(`client handler for ${method} threw ${error?.name ?? 'a value'}: ${error?.message ?? String(error)}`).toJSON() }),
      );
  }

  #answer(id, { result, error }) {
    if (this.#closedError) return;
    const message = error ? { jsonrpc: '2.0', id, error } : { jsonrpc: '2.0', id, result };
    let text;
    try {
      text = JSON.stringify(message);
    } catch (e) {
      // The handler returned something with no JSON form: say so rather than leave the request unanswered.
      text = JSON.stringify({ jsonrpc: '2.0', id, error: new InternalError(`client handler returned a value with no JSON form: ${e.message}`).toJSON() });
    }
    this.#transport.write(text).catch(() => {});
  }

  /** The client's own handler for tool calls, undo and confirmation requests it owns. */
  #builtinHandler(method, params) {
    if (!params || typeof params !== 'object') return undefined;
    if (method === 'tool/call') {
      const session = this.#sessions.get(params.sessionId);
      const tool = session?.tools.get(params.name);
      return tool ? (p, { signal }) => this.#runTool(session, tool, p, signal) : undefined;
    }
    if (method === 'tool/undo') {
      return this.#undo.has(params.undo) ? (p) => this.#runUndo(p) : undefined;
    }
    if (method === 'user/ask') {
      const handler = this.#sessions.get(params.sessionId)?.onAsk ?? this.onAsk;
      return handler ? (p, { signal }) => this.#ask(handler, p, signal) : undefined;
    }
    if (method === 'user/elicit' && this.onElicitation) {
      return (p, { signal }) => this.#elicit(this.onElicitation, p, signal);
    }
    if (method === 'confirmation/request') {
      const handler = this.#sessions.get(params.sessionId)?.onConfirm ?? this.onConfirm;
      return handler ? (p) => this.#decide(handler, p).then(({ decision, ...rest }) => ({ decision, ...rest })) : undefined;
    }
    return undefined;
  }

  async #runTool(session, tool, params, signal) {
    const ctx = {
      sessionId: session.id, turnId: String(params.turnId ?? ''), callId: String(params.callId ?? ''),
      name: tool.name, revision: Number.isInteger(params.revision) ? params.revision : 0,
      idempotencyKey: String(params.idempotencyKey ?? ''), inDoubt: params.inDoubt === true,
      attempt: Number.isInteger(params.attempt) ? params.attempt : 1, signal, session,
      // A `tool/progress` notification: the server sends it on as a `toolProgress` event.
      reportProgress: (progress, total, message) => this.notify('tool/progress', {
        sessionId: session.id, callId: String(params.callId ?? ''), progress,
        ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }),
      }),
    };
    let value;
    try {
      value = await tool.run(params.arguments ?? {}, ctx);
    } catch (error) {
      this.#rememberToolError(ctx, error);
      if (error instanceof AgentRPCError) throw error;
      throw new InternalError(`tool ${JSON.stringify(tool.name)} threw ${error?.name ?? 'a value'}: ${error?.message ?? String(error)}`,
        { exceptionType: error?.name ?? typeof error });
    }
    const { outcome, content, undo } = toolOutcome(value);
    try {
      JSON.stringify(content);
    } catch (error) {
      this.#rememberToolError(ctx, error);
      throw new InternalError(`tool ${JSON.stringify(tool.name)} returned a value with no JSON form: ${error.message}`);
    }
    const answer = { outcome, content };
    if (undo) {
      const token = `undo-${randomUUID()}`;
      this.#undo.set(token, { sessionId: ctx.sessionId, turnId: ctx.turnId, callId: ctx.callId, name: tool.name, undo });
      answer.undo = token;
    }
    return answer;
  }

  #rememberToolError(ctx, error) {
    let byCall = this.#toolErrors.get(ctx.sessionId);
    if (!byCall) this.#toolErrors.set(ctx.sessionId, (byCall = new Map()));
    byCall.set(ctx.callId, error);
  }

  /** @internal Chains what a tool threw to the turn's ToolExecutorError as its `cause`. */
  _attachToolError(sessionId, error) {
    if (!(error instanceof ToolExecutorError)) return;
    const byCall = this.#toolErrors.get(sessionId);
    const thrown = byCall?.get(error.callId);
    if (thrown === undefined) return;
    byCall.delete(error.callId);
    Object.defineProperty(error, 'cause', { value: thrown, configurable: true, writable: true });
  }

  async #runUndo(params) {
    const record = this.#undo.get(params.undo);
    if (!record) throw new InvalidParamsError(`unknown undo token ${JSON.stringify(params.undo)}`);
    this.#undo.delete(params.undo);
    try {
      await record.undo();
    } catch (error) {
      throw new InternalError(`undo of ${JSON.stringify(record.name)} threw ${error?.name}: ${error?.message ?? String(error)}`);
    }
    return {};
  }

  /** Runs an onAsk handler: a string, or `{answer}`. */
  async #ask(handler, p, signal) {
    const answer = await handler({
      sessionId: p.sessionId, turnId: p.turnId, callId: p.callId, question: p.question, options: p.options,
      session: this.#sessions.get(p.sessionId), signal,
    });
    if (typeof answer === 'string') return { answer };
    if (answer && typeof answer === 'object' && typeof answer.answer === 'string') return { answer: answer.answer };
    throw new TypeError(`onAsk must return a string or {answer}, not ${JSON.stringify(answer)}`);
  }

  /** Runs an onElicitation handler: the form's values (an object) accept it; 'decline' or 'cancel' say so. */
  async #elicit(handler, p, signal) {
    const answer = await handler({
      sessionId: p.sessionId, turnId: p.turnId, callId: p.callId, server: p.server, message: p.message,
      requestedSchema: p.requestedSchema, session: this.#sessions.get(p.sessionId), signal,
    });
    if (answer === 'decline' || answer === 'cancel') return { action: answer };
    if (answer && typeof answer === 'object' && !Array.isArray(answer)) return { action: 'accept', content: answer };
    throw new TypeError(`onElicitation must return the form's values (an object), 'decline' or 'cancel', not ${JSON.stringify(answer)}`);
  }

  /** Runs an onConfirm handler; its answer as `{decision, reason?}`. A throwing handler denies. */
  async #decide(handler, p) {
    const call = {
      sessionId: p.sessionId, turnId: p.turnId, callId: p.callId, name: p.name, arguments: p.arguments,
      reason: p.reason, session: this.#sessions.get(p.sessionId),
    };
    try {
      return decisionOf(await handler(call));
    } catch (error) {
      return { decision: 'deny', reason: `the confirmation handler failed: ${error?.message ?? String(error)}` };
    }
  }

  /** A `confirmationRequested` event: an onConfirm handler, if any, answers with `session/confirm`. */
  async #autoConfirm(event) {
    const handler = this.#sessions.get(event.sessionId)?.onConfirm ?? this.onConfirm;
    if (!handler) return;
    const decision = await this.#decide(handler, event);
    try {
      await this.request('session/confirm', { sessionId: event.sessionId, callId: event.callId, ...decision });
    } catch {
      // The turn ended meanwhile (cancel, timeout, close): nothing waits for this answer.
    }
  }

  // -- the end ---------------------------------------------------------------------

  #onTransportClosed({ exitCode, signal, error }) {
    if (this.#closing) {
      this.#lose(new ConnectionClosedError('the client closed the connection', { exitCode, signal }));
      return;
    }
    const reason = error ? `the connection to the server failed: ${error.message}`
      : exitCode !== null || signal ? 'the server exited' : 'the server closed its stdout';
    this.#lose(new ServerExitedError(reason, { exitCode, signal, stderrTail: this.#transport.stderrTail }));
  }

  #lose(error) {
    if (this.#closedError) return;
    this.#closedError = error;
    for (const entry of [...this.#pending.values()]) entry.reject(this.#closedCopy());
    for (const sub of [...this.#subscribers]) sub.end();
    for (const controller of this.#inbound.values()) controller.abort();
    this.#inbound.clear();
    this.#markLost();
  }

  /**
   * Shuts the server down politely (`shutdown`, `exit`, end of stdin), then
   * makes sure it is gone (SIGTERM, SIGKILL). Safe to call more than once.
   */
  close() {
    this.#closePromise ??= this.#close();
    return this.#closePromise;
  }

  async #close() {
    const alive = !this.#closedError && !this.#transport.exited;
    this.#closing = true;
    if (alive && this.initialized) {
      try { await this.request('shutdown', undefined, { timeout: this.shutdownTimeout }); } catch { /* going anyway */ }
      try { await this.notify('exit'); } catch { /* going anyway */ }
    }
    await this.#transport.endInput(this.shutdownTimeout);
    await this.#transport.stop(this.shutdownTimeout);
    await Promise.race([this.#connectionLost, delay(this.shutdownTimeout)]);
    this.#lose(new ConnectionClosedError('the client closed the connection'));
  }

  // -- sessions ---------------------------------------------------------------------

  /**
   * `session/create`: a new session. Every SessionConfig field
   * (docs/protocol.md §3) is accepted as is; `tools` may mix tool() values
   * (whose functions then answer this session's tool calls) and plain specs;
   * `onConfirm` decides this session's confirmations.
   */
  async openSession(config = {}) {
    const { tools, onConfirm, onAsk, ...wire } = config;
    const { specs, functions } = splitTools(tools ?? []);
    if (tools !== undefined) wire.tools = specs;
    const result = await this.request('session/create', wire);
    return this.#sessionFrom(result, 'session/create', functions, onConfirm, onAsk);
  }

  /**
   * `session/resume`: loads a stored session. `tools` are the functions that
   * answer its tool calls (the specs were stored with the session).
   */
  async resumeSession(sessionId, { tools = [], onConfirm, onAsk, ...rest } = {}) {
    const result = await this.request('session/resume', { sessionId, ...rest });
    return this.#sessionFrom(result, 'session/resume', splitTools(tools).functions, onConfirm, onAsk);
  }

  /** `session/list`: `{data: [...], nextCursor?}`. */
  listSessions(params = {}) {
    return this.request('session/list', params);
  }

  /** The Session handle for an id (the one this client holds, if any). */
  session(sessionId) {
    let handle = this.#sessions.get(sessionId);
    if (!handle) this.#sessions.set(sessionId, (handle = new Session(this, sessionId, {})));
    return handle;
  }

  /** @internal A session the server made from another (session/fork). */
  _adopt(result, method, functions, onConfirm, onAsk) {
    return this.#sessionFrom(result, method, new Map(functions), onConfirm, onAsk);
  }

  #sessionFrom(result, method, functions, onConfirm, onAsk) {
    if (!result || typeof result.sessionId !== 'string') throw new InternalError(`${method} returned no sessionId`);
    const existing = this.#sessions.get(result.sessionId);
    if (existing) {
      existing._update(result, functions, onConfirm, onAsk);
      return existing;
    }
    const session = new Session(this, result.sessionId, { result, functions, onConfirm, onAsk });
    this.#sessions.set(session.id, session);
    return session;
  }

  /** @internal The session was closed or deleted: forget its tools, undo records and errors. */
  _forgetSession(sessionId) {
    this.#sessions.delete(sessionId);
    this.#toolErrors.delete(sessionId);
    for (const [token, record] of this.#undo) if (record.sessionId === sessionId) this.#undo.delete(token);
  }
}

/**
 * An onConfirm answer as the wire decision: `true`/`false`, a decision word
 * ("approve", "deny", or any the server knows), or `{decision, reason?, ...}`.
 */
export function decisionOf(answer) {
  if (answer === true) return { decision: 'approve' };
  if (answer === false) return { decision: 'deny' };
  if (typeof answer === 'string') return { decision: answer };
  if (answer && typeof answer === 'object' && typeof answer.decision === 'string') return { ...answer };
  if (answer && typeof answer === 'object' && typeof answer.approve === 'boolean') {
    const { approve, ...rest } = answer;
    return { decision: approve ? 'approve' : 'deny', ...rest };
  }
  throw new TypeError(`onConfirm must return true, false, a decision or {decision, reason}, not ${JSON.stringify(answer)}`);
}

const CASSETTE_MODES = ['record', 'replay', 'auto'];
const CASSETTE_PACES = ['fast', 'recorded'];

/**
 * The server options of a model cassette (docs/testing.md): none without one,
 * a bare path replays, `{ path, mode, pace }` says how.
 * @param {import('./index.js').CassetteOption | undefined} cassette
 * @returns {string[]}
 */
export function cassetteArgs(cassette) {
  if (cassette === undefined || cassette === null) return [];
  const { path, mode = 'replay', pace = 'fast' } = typeof cassette === 'string' ? { path: cassette } : cassette;
  if (typeof path !== 'string' || path === '') throw new TypeError('cassette needs a path');
  if (!CASSETTE_MODES.includes(mode)) throw new TypeError(`cassette mode must be one of ${CASSETTE_MODES.join(', ')}, not ${mode}`);
  if (!CASSETTE_PACES.includes(pace)) throw new TypeError(`cassette pace must be one of ${CASSETTE_PACES.join(', ')}, not ${pace}`);
  return ['--model-cassette', path, '--cassette-mode', mode, ...(pace === 'fast' ? [] : ['--cassette-pace', pace])];
}
