// A handle on one server session: turns, streaming, confirmation, state and
// transcript edits (docs/protocol.md §3–§10). Get one from
// `client.openSession()`, `client.resumeSession()` or `client.session(id)`.

import { AsyncQueue } from './queue.js';
import { splitTools } from './tools.js';

/** How long leaving a stream early waits for the withdrawn turn's `turnEnded`. */
const TURN_END_WAIT_MS = 10000;

const SENT = Symbol('sent');
const CLOSED = Symbol('closed');
const TIMEOUT = Symbol('timeout');

/** A turn input: a string, or `{text, images?}`; `images` adds attachments to a string. */
function turnInput(input, images) {
  if (images === undefined) return input;
  if (typeof input === 'string') return { text: input, images };
  return { ...input, images };
}

export class Session {
  /**
   * @param {import('./client.js').Client} client
   * @param {string} id
   */
  constructor(client, id, { result, functions, onConfirm, onAsk } = {}) {
    this.client = client;
    this.id = id;
    /** Revision reported when the session was created or resumed. */
    this.revision = result?.revision;
    /** Active profile reported when the session was created or resumed. */
    this.activeProfile = result?.activeProfile;
    /** Decides this session's confirmations (before the client's onConfirm). */
    this.onConfirm = onConfirm;
    /** Answers this session's `user/ask` questions (before the client's onAsk). */
    this.onAsk = onAsk;
    /** The parked turn `resumeSession` found (`onDisconnect: "park"`), for `continueTurn()`. */
    this.parked = result?.parkedTurn;
    /** @type {Map<string, {name: string, spec: object, run: Function}>} */
    this.tools = new Map(functions ?? []);
  }

  /** @internal */
  _update(result, functions, onConfirm, onAsk) {
    if (Number.isInteger(result.revision)) this.revision = result.revision;
    if (result.activeProfile !== undefined) this.activeProfile = result.activeProfile;
    this.parked = result.parkedTurn;
    for (const [name, t] of functions) this.tools.set(name, t);
    if (onConfirm) this.onConfirm = onConfirm;
    if (onAsk) this.onAsk = onAsk;
  }

  /**
   * Answers this session's calls of these tools with their functions — for a
   * resumed session, or tools named by profiles.
   */
  addTools(...tools) {
    const { functions } = splitTools(tools);
    if (functions.size !== tools.length) throw new TypeError('addTools takes tool({...}) values');
    for (const [name, t] of functions) this.tools.set(name, t);
  }

  #params(extra) {
    const params = { sessionId: this.id };
    for (const [key, value] of Object.entries(extra)) if (value !== undefined) params[key] = value;
    return params;
  }

  async #turnRequest(method, params, { signal, timeout } = {}) {
    try {
      return await this.client.request(method, params, { signal, timeout });
    } catch (error) {
      this.client._attachToolError(this.id, error);
      throw error;
    }
  }

  /**
   * `session/send`: runs one turn and resolves with its TurnResult. A failed
   * turn rejects with its AgentRPCError subclass; an aborted `signal` cancels
   * the turn (`$/cancelRequest`) and rejects with CancelledError.
   */
  send(input, { signal, options, images, timeout, ...more } = {}) {
    return this.#turnRequest('session/send', this.#params({ ...more, input: turnInput(input, images), options }), { signal, timeout });
  }

  /**
   * `session/continue`: goes on with the parked turn. Its pending requests come
   * again (same call ids and `idempotencyKey`, `inDoubt` when they may have run)
   * and are answered by this client's tools and handlers; resolves with the
   * turn's TurnResult as `send` would have.
   */
  async continueTurn({ signal, timeout } = {}) {
    const result = await this.#turnRequest('session/continue', this.#params({}), { signal, timeout });
    this.parked = undefined;
    return result;
  }

  /**
   * Runs one turn and iterates its events as they arrive. Leaving the loop
   * early (`break`, `return`, a thrown error) cancels the turn.
   */
  stream(input, { signal, options, images, ...more } = {}) {
    return new TurnStream(this, this.#params({ ...more, input: turnInput(input, images), options }), signal);
  }

  /**
   * `session/generate`: structured output validated against `schema` by the
   * server. Resolves with `{value, turnId, usage}`.
   */
  generate(input, { schema, strict, signal, options, images, timeout, ...more } = {}) {
    if (!schema || typeof schema !== 'object') throw new TypeError('generate needs {schema}: a JSON Schema object');
    const params = this.#params({ ...more, input: turnInput(input, images), schema, strict, options });
    return this.#turnRequest('session/generate', params, { signal, timeout });
  }

  /**
   * `session/steer`: adds input to the running turn; the model sees it at the
   * turn's next checkpoint (docs/protocol.md §17). With no turn running it is
   * NoRunningTurnError; `expectedTurnId` naming another turn is TurnMismatchError.
   */
  steer(input, { images, expectedTurnId } = {}) {
    return this.client.request('session/steer', this.#params({ input: turnInput(input, images), expectedTurnId }));
  }

  /** `session/setApprovalRules`: `{add?, remove?}` rules that decide confirmations without asking. */
  setApprovalRules({ add, remove } = {}) {
    return this.client.request('session/setApprovalRules', this.#params({ add, remove }));
  }

  /**
   * `session/rewind`: removes the turns after `toEntryId` (or from `turnId`
   * on), running their tools' undo when `undo` is true; `compaction` (a
   * summary entry's id) undoes that compaction instead. `undo` has no
   * default, as on the wire: reverting what the removed calls did is the
   * caller's decision every time.
   */
  rewind({ toEntryId, turnId, compaction, undo } = {}) {
    if (typeof undo !== 'boolean') {
      return Promise.reject(new TypeError('rewind: undo must be true or false'));
    }
    return this.client.request('session/rewind', this.#params({ toEntryId, turnId, compaction, undo }));
  }

  /**
   * `session/compact`: the entries before the last `keepLast` are summarized
   * by the model into one `summary` entry; `preview: true` answers the
   * summary and the token figures and changes nothing. Undo it with
   * `rewind({ compaction: result.entryId, undo: false })`.
   */
  compact({ keepLast, instructions, preview } = {}) {
    return this.client.request('session/compact', this.#params({ keepLast, instructions, preview }));
  }

  /**
   * `session/fork`: a new session with this one's configuration and transcript
   * (up to and including `atEntryId`); this session's tool functions and
   * handlers answer the fork's calls too.
   */
  async fork({ atEntryId, ...more } = {}) {
    const result = await this.client.request('session/fork', this.#params({ ...more, atEntryId }));
    return this.client._adopt(result, 'session/fork', this.tools, this.onConfirm, this.onAsk);
  }

  /** `session/cancel`: stops the running turn at its next checkpoint; true if one was running. */
  /**
   * `session/park`: parks the running turn at its next wait for the client (at
   * once when it waits already); resolves, once it parked, with the parked turn
   * (also `this.parked`), or undefined when no turn ran or it ended without waiting.
   */
  async park({ signal, timeout } = {}) {
    const result = await this.client.request('session/park', this.#params({}), { signal, timeout });
    this.parked = result?.parked;
    return this.parked;
  }

  async cancel() {
    const result = await this.client.request('session/cancel', this.#params({}));
    return Boolean(result?.wasRunning);
  }

  /**
   * `session/confirm`: settles the pending confirmation of `callId`.
   * `decision` is true/false or a decision word ("approve", "deny"); `reason`
   * is shown to the model when denying.
   */
  async confirm(callId, decision, { reason, ...more } = {}) {
    const word = decision === true ? 'approve' : decision === false ? 'deny' : decision;
    if (typeof word !== 'string') throw new TypeError('decision must be true, false or a decision word');
    await this.client.request('session/confirm', this.#params({ callId, decision: word, reason, ...more }));
  }

  /** `session/getState`. */
  getState() {
    return this.client.request('session/getState', this.#params({}));
  }

  /**
   * `session/getPrompt`: the prompt `name` of the session's MCP server
   * `server` with its `args` (strings) filled in: `{description?, messages}`.
   */
  getPrompt(server, name, args) {
    return this.client.request('session/getPrompt', this.#params({ server, name, arguments: args }));
  }

  /**
   * `session/getMedia`: an image or audio clip a tool result named (a
   * `toolOutput` entry's `media[i].sha256`), whole, as `toolCallFinished.media`
   * carried it: `{type, mimeType, data}` (`data` base64). InvalidParamsError
   * for a digest no tool result of the session names, or whose bytes are no
   * longer in the store.
   */
  getMedia(sha256) {
    return this.client.request('session/getMedia', this.#params({ sha256 }));
  }

  /** `session/getTranscript`: `{revision, instructions, entries}`. */
  getTranscript() {
    return this.client.request('session/getTranscript', this.#params({}));
  }

  /**
   * `session/mutateTranscript`: applies operations (built with `ops`) all or
   * none. `expectedRevision` guards against concurrent edits (RevisionMismatchError).
   */
  mutateTranscript(operations, { expectedRevision } = {}) {
    const list = Array.isArray(operations) ? operations : [operations];
    return this.client.request('session/mutateTranscript', this.#params({ operations: list, expectedRevision }));
  }

  /** `session/setProperties`: `{set?, remove?}`. */
  setProperties({ set, remove } = {}) {
    return this.client.request('session/setProperties', this.#params({ set, remove }));
  }

  /**
   * This session's events from now on, typed, until the loop is left or the
   * connection closes — for watching turns that `send` runs.
   * @returns {AsyncIterableIterator<import('./index.js').TurnEvent>}
   */
  events() {
    const queue = new AsyncQueue();
    const unsubscribe = this.client._subscribe(this.id, (event) => queue.push(event), () => queue.push(CLOSED));
    let done = false;
    const finish = () => {
      done = true;
      unsubscribe();
      return { done: true, value: undefined };
    };
    return {
      [Symbol.asyncIterator]() { return this; },
      async next() {
        if (done) return { done: true, value: undefined };
        const item = await queue.take();
        return item === CLOSED ? finish() : { done: false, value: item };
      },
      async return() { return finish(); },
    };
  }

  /** `session/close`: cancels a running turn and unloads the session. */
  async close() {
    await this.client.request('session/close', this.#params({}));
    this.client._forgetSession(this.id);
  }

  /** `session/delete`: removes the session from the store. */
  async delete() {
    await this.client.request('session/delete', this.#params({}));
    this.client._forgetSession(this.id);
  }

  /** `await using session = await client.openSession(...)` closes it on scope exit. */
  async [Symbol.asyncDispose]() {
    if (!this.client.closed) await this.close();
  }
}

/**
 * One turn's events, then its result. The turn starts at the first `next()`;
 * `result` holds the TurnResult once the loop ended normally, `error` what a
 * failed turn rejected with, `text` the text streamed so far.
 */
export class TurnStream {
  #session;
  #params;
  #queue = new AsyncQueue();
  #controller = new AbortController();
  #unsubscribe;
  #started = false;
  #finished = false;
  #sendSettled = false;
  #turnStarted = false;
  #turnEnded = false;

  constructor(session, params, signal) {
    this.#session = session;
    this.#params = params;
    /** The TurnResult, once iteration ended normally. */
    this.result = undefined;
    /** The error the turn ended with, if it failed. */
    this.error = undefined;
    /** Text deltas seen so far, joined. */
    this.text = '';
    /** The turn's id, once its first event arrived. */
    this.turnId = undefined;
    this.#unsubscribe = () => {};
    if (signal) {
      if (signal.aborted) this.#controller.abort(signal.reason);
      else signal.addEventListener('abort', () => this.#controller.abort(signal.reason), { once: true });
    }
  }

  [Symbol.asyncIterator]() { return this; }

  #start() {
    if (this.#started) return;
    this.#started = true;
    // Subscribed here, just before the send, so no event of the turn is missed and
    // a stream that is never iterated holds no subscription.
    this.#unsubscribe = this.#session.client._subscribe(this.#session.id, (e) => this.#queue.push(e), () => this.#queue.push(CLOSED));
    const { sessionId, input, ...more } = this.#params;
    this.#session.send(input, { ...more, signal: this.#controller.signal }).then(
      (result) => { this.result = result; this.#sendSettled = true; this.#queue.push(SENT); },
      (error) => { this.error = error; this.#sendSettled = true; this.#queue.push(SENT); },
    );
  }

  #see(event) {
    this.turnId ??= event.turnId;
    if (event.type === 'textDelta') this.text += event.delta;
    else if (event.type === 'turnStarted') this.#turnStarted = true;
    else if (event.type === 'turnEnded') this.#turnEnded = true;
  }

  /** @returns {Promise<IteratorResult<import('./index.js').TurnEvent, undefined>>} */
  async next() {
    if (this.#finished) return { done: true, value: undefined };
    this.#start();
    for (;;) {
      const item = await this.#queue.take();
      // The connection closed: the send rejects with it in a moment (SENT follows).
      if (item === CLOSED) continue;
      if (item === SENT) {
        // Everything the server wrote before its answer is already queued (lines are handled in order).
        this.#finished = true;
        this.#unsubscribe();
        if (this.error !== undefined) throw this.error;
        return { done: true, value: undefined };
      }
      this.#see(item);
      return { done: false, value: item };
    }
  }

  /**
   * Leaving the loop early: withdraws a running turn (`$/cancelRequest`) and
   * waits (bounded) until the server reports it ended, so the session takes the
   * next turn at once.
   */
  async return() {
    if (this.#finished) return { done: true, value: undefined };
    this.#finished = true;
    if (this.#started && !this.#sendSettled) {
      this.#controller.abort(new Error('the stream was left before the turn ended'));
      const deadline = Date.now() + TURN_END_WAIT_MS;
      while (!this.#sendSettled || (this.#turnStarted && !this.#turnEnded)) {
        const item = await this.#queue.takeWithin(Math.max(0, deadline - Date.now()), TIMEOUT);
        if (item === TIMEOUT || (item === CLOSED && this.#session.client.closed)) break;
        if (item !== SENT && item !== CLOSED) this.#see(item);
      }
    }
    this.#unsubscribe();
    return { done: true, value: undefined };
  }

  /** Consumes the remaining events and resolves with the TurnResult (or rejects with the turn's error). */
  async finish() {
    for await (const event of this) void event;
    if (this.error !== undefined) throw this.error;
    return this.result;
  }
}
