// Type declarations of the agentrpc Node client (hand-written; the wire types
// they use are generated from schema/ into ./generated/wire.d.ts).

import type {
  ClientCapabilities,
  ClientInfo,
  ClientNotifications,
  ClientRequests,
  ConfirmationRequestParams,
  ImageAttachment,
  SessionEvent,
  ServerRequests,
  ServerNotifications,
  ToolSpec,
  TranscriptOperation,
  TranscriptEntry,
  TurnInput,
} from './generated/wire.js';

// -- what the declarations need from the environment ------------------------------
//
// They check under `--strict` with TypeScript 4.8 and later, with or without the
// `dom` lib or @types/node: nothing here needs more than lib es2022.

/**
 * What the client does with an AbortSignal you pass it: read `aborted` and
 * `reason`, listen for `abort`. The AbortSignal of Node or of the `dom` lib
 * fits, and so does any object of this shape.
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * The signal the client hands you (a tool's `ctx.signal`, a question's, a server
 * request's): the environment's `AbortSignal` when its declarations have one (the
 * `dom` lib, @types/node), so it can go on to `fetch` and the like; else
 * AbortSignalLike. At run time it is always Node's AbortSignal.
 */
export type HostAbortSignal = typeof globalThis extends { AbortSignal: { prototype: infer S } } ? S : AbortSignalLike;

declare global {
  // `await using client = await Client.spawn()` needs these. TypeScript 5.2+
  // declares them in lib esnext.disposable, @types/node does too; these merge
  // with theirs (the same members), and give an older compiler or a project
  // without that lib `client[Symbol.asyncDispose]()`. Node defines the symbol
  // from 20.4 (and 18.18) on.
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol;
  }
  interface AsyncDisposable {
    [Symbol.asyncDispose](): PromiseLike<void>;
  }
}

export * from './generated/wire.js';
export * from './generated/protocol.js';
// As index.js: every error class, hand-written and generated.
export * from './errors.js';

type Params<M extends keyof ClientRequests> = ClientRequests[M]['params'];
type Result<M extends keyof ClientRequests> = ClientRequests[M]['result'];

/** The result of `session/send`: message, stopReason, usage, counts, revision. */
export type TurnResult = Result<'session/send'>;
/** The result of `session/generate`, with `value` typed as `T`. */
export type GenerateResult<T = unknown> = Omit<Result<'session/generate'>, 'value'> & { value: T };
export type SessionState = Result<'session/getState'>;
export type Transcript = Result<'session/getTranscript'>;
export type MutationResult = Result<'session/mutateTranscript'>;
export type PropertiesResult = Result<'session/setProperties'>;
export type SessionList = Result<'session/list'>;
export type TurnOptions = NonNullable<Params<'session/send'>['options']>;
/** What `session/create` accepts besides the client-side fields. */
export type SessionConfig = Params<'session/create'>;
/** A confirmation decision word of the protocol (`approve`, `deny`, ...). */
export type ConfirmDecision = Params<'session/confirm'>['decision'];

/** A session event as the client delivers it: the event plus where it belongs. */
export type TurnEvent = SessionEvent & {
  sessionId: string;
  /** Absent for events outside a turn (e.g. propertiesChanged from setProperties). */
  turnId?: string;
  seq: number;
};
/** The event of one type, e.g. `EventOf<"textDelta">`. */
export type EventOf<T extends TurnEvent['type']> = Extract<TurnEvent, { type: T }>;

// -- tools --------------------------------------------------------------------

/** Facts about a tool call, handed to `run`. */
export interface ToolContext {
  sessionId: string;
  turnId: string;
  callId: string;
  name: string;
  /** The transcript revision when the call was made. */
  revision: number;
  /** Names this call for good: the same when the server sends it again after a
   * crash or a parked turn. Keep what ran under it to run a call once. */
  idempotencyKey: string;
  /** True when the call was sent before (a parked or crashed turn continued) and no
   * result was recorded: it may have run. Look `idempotencyKey` up first. */
  inDoubt: boolean;
  /** Which send of the call this is (1 the first). */
  attempt: number;
  /** Aborted when the server withdraws the call (`$/cancelRequest`) or the connection closes. */
  signal: HostAbortSignal;
  session: Session;
  /** Reports how far the call has come (`tool/progress`); the server sends it on as a `toolProgress` event. */
  reportProgress(progress: number, total?: number, message?: string): Promise<void>;
}

/** Rolls a call back when the turn fails (`tool/undo`). */
export type UndoFunction = () => unknown | Promise<unknown>;

declare const outcomeBrand: unique symbol;
/** A value made by ok(), failed(), denied() or conflict(). */
export interface ToolOutcome {
  readonly [outcomeBrand]: 'ok' | 'failed' | 'denied' | 'conflict';
  readonly content: unknown;
  readonly undo?: UndoFunction;
}

/** What `run` may return: a JSON value (outcome ok), `{content, undo}`, or an outcome. */
export type ToolReturn = unknown | { content?: unknown; undo: UndoFunction } | ToolOutcome;

export interface ToolDefinition<A = any> extends Omit<ToolSpec, 'name'> {
  name: string;
  description?: string;
  /** JSON Schema of the arguments (default: an object with no properties). */
  inputSchema?: unknown;
  confirmation?: 'never' | 'always';
  run: (args: A, ctx: ToolContext) => ToolReturn | Promise<ToolReturn>;
}

/** A tool: the spec sent to the server and the function that answers its calls. */
export interface Tool<A = any> {
  readonly name: string;
  readonly spec: ToolSpec;
  readonly run: ToolDefinition<A>['run'];
}

export declare function tool<A = any>(definition: ToolDefinition<A>): Tool<A>;
export declare function isTool(value: unknown): value is Tool;
export declare function ok(content: unknown, options?: { undo?: UndoFunction }): ToolOutcome;
export declare function failed(content: unknown): ToolOutcome;
export declare function denied(reason: unknown): ToolOutcome;
export declare function conflict(content: unknown): ToolOutcome;

// -- confirmation ----------------------------------------------------------------

/** A tool call waiting for a decision. */
export interface ConfirmationCall extends Omit<ConfirmationRequestParams, never> {
  session?: Session;
}
/** true / false, a decision word, or `{decision, reason?}` (`{approve, reason?}` also works). */
export type ConfirmAnswer =
  | boolean
  | ConfirmDecision
  | ({ decision: ConfirmDecision; reason?: string } & Record<string, unknown>)
  | { approve: boolean; reason?: string };
export type ConfirmHandler = (call: ConfirmationCall) => ConfirmAnswer | Promise<ConfirmAnswer>;

type AskRequestParams = ServerRequests['user/ask']['params'];
/** A question the model asks with the built-in ask_user tool (`user/ask`). */
export interface UserQuestion extends AskRequestParams {
  session?: Session;
  /** Aborted when the server withdraws the question (a cancel, the timeout). */
  signal: HostAbortSignal;
}
/** Answers a question: the answer text, or `{answer}`. */
export type AskHandler = (question: UserQuestion) => string | { answer: string } | Promise<string | { answer: string }>;
type ElicitRequestParams = ServerRequests['user/elicit']['params'];
/** What an onElicitation handler is asked: an MCP server's form, during call `callId`. */
export interface Elicitation extends ElicitRequestParams {
  session?: Session;
  /** Aborted when the server withdraws the form (a cancel, the timeout). */
  signal: HostAbortSignal;
}
/** Fills in a form: its values (accepted), or 'decline' / 'cancel'. */
export type ElicitationHandler = (elicitation: Elicitation) =>
  Record<string, unknown> | 'decline' | 'cancel' | Promise<Record<string, unknown> | 'decline' | 'cancel'>;
export declare function decisionOf(answer: ConfirmAnswer): { decision: ConfirmDecision; reason?: string };

// -- the client -------------------------------------------------------------------

export interface SpawnOptions {
  /** A path, or a name on PATH. Default: $AGENTRPC_BIN, `agentrpc` on PATH, `.build/{debug,release}/agentrpc` above this package. */
  binary?: string;
  /** Arguments for the server (e.g. `["--store", dir]`). */
  args?: string[];
  /** Added to the inherited environment (`inheritEnv: false` uses it alone). */
  env?: Record<string, string>;
  inheritEnv?: boolean;
  cwd?: string;
  /** The server's stderr: kept in `stderrTail` (default), passed through, or handed to a function line by line. */
  stderr?: 'collect' | 'inherit' | ((line: string) => void);
  stderrTailLines?: number;
  /** A stdout frame larger than this closes the connection (default 256 MiB). */
  maxFrameBytes?: number;
  capabilities?: ClientCapabilities;
  clientInfo?: ClientInfo;
  /** Run the `initialize` handshake (default true). */
  initialize?: boolean;
  /** Default timeout (ms) of every request; default none. */
  requestTimeout?: number;
  /** How long each step of close() waits (ms, default 5000). */
  shutdownTimeout?: number;
  /** Decides confirmations of sessions without their own onConfirm. */
  onConfirm?: ConfirmHandler;
  /** Answers `user/ask` for sessions without their own onAsk; also declares `capabilities.askUser`. */
  onAsk?: AskHandler;
  /** Answers `user/elicit` (MCP servers' forms); also declares `capabilities.elicitation`. */
  onElicitation?: ElicitationHandler;
  /** Records or replays the server's model traffic (`--model-cassette`, docs/testing.md); a bare path replays. */
  cassette?: CassetteOption;
}

/** A model cassette: `replay` (default) answers from the file, `record` writes a new one, `auto` fills in what is missing. */
export type CassetteOption = string | { path: string; mode?: 'record' | 'replay' | 'auto'; pace?: 'fast' | 'recorded' };
/** The server options `Client.spawn({ cassette })` adds. */
export declare function cassetteArgs(cassette: CassetteOption | undefined): string[];

export interface RequestOptions {
  signal?: AbortSignalLike;
  /** Milliseconds; default the client's requestTimeout. */
  timeout?: number;
}

export type ServerRequestHandler<M extends string> = (
  params: M extends keyof ServerRequests ? ServerRequests[M]['params'] : unknown,
  context: { signal: HostAbortSignal },
) => unknown;

export declare const VERSION: string;
export declare const DEFAULT_CAPABILITIES: Readonly<ClientCapabilities>;

export declare class Client implements AsyncDisposable {
  static spawn(options?: SpawnOptions): Promise<Client>;
  requestTimeout: number | undefined;
  shutdownTimeout: number;
  onConfirm: ConfirmHandler | undefined;
  onAsk: AskHandler | undefined;
  onElicitation: ElicitationHandler | undefined;
  readonly initializeResult: Result<'initialize'> | undefined;
  readonly initialized: boolean;
  readonly serverInfo: Result<'initialize'>['serverInfo'] | undefined;
  readonly serverCapabilities: Result<'initialize'>['capabilities'] | undefined;
  readonly protocolVersion: number | undefined;
  readonly pid: number | undefined;
  readonly exitCode: number | null;
  readonly stderrTail: string;
  readonly drainWaits: number;
  readonly closed: boolean;
  initialize(options?: { capabilities?: ClientCapabilities; clientInfo?: ClientInfo }): Promise<Result<'initialize'>>;
  waitClosed(timeoutMs?: number): Promise<boolean>;
  request<M extends keyof ClientRequests>(method: M, params?: Params<M>, options?: RequestOptions): Promise<Result<M>>;
  request(method: string, params?: unknown, options?: RequestOptions): Promise<unknown>;
  notify<M extends keyof ClientNotifications>(method: M, params?: ClientNotifications[M]): Promise<void>;
  notify(method: string, params?: unknown): Promise<void>;
  onNotification<M extends keyof ServerNotifications>(method: M, listener: (params: ServerNotifications[M]) => unknown): () => void;
  onNotification(method: string, listener: (params: unknown) => unknown): () => void;
  onRequest<M extends string>(method: M, handler: ServerRequestHandler<M>): () => void;
  openSession(config?: Omit<SessionConfig, 'tools'> & { tools?: (Tool | ToolSpec)[]; onConfirm?: ConfirmHandler; onAsk?: AskHandler }): Promise<Session>;
  resumeSession(sessionId: string, options?: Omit<Params<'session/resume'>, 'sessionId'> & { tools?: Tool[]; onConfirm?: ConfirmHandler; onAsk?: AskHandler }): Promise<Session>;
  listSessions(params?: Params<'session/list'>): Promise<SessionList>;
  session(sessionId: string): Session;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface SendOptions {
  /** Aborting cancels the turn (`$/cancelRequest`); the promise rejects with CancelledError. */
  signal?: AbortSignalLike;
  options?: TurnOptions;
  /** Image attachments added to a string input. */
  images?: ImageAttachment[];
  timeout?: number;
}

export declare class Session implements AsyncDisposable {
  readonly client: Client;
  readonly id: string;
  revision: number | undefined;
  activeProfile: unknown;
  onConfirm: ConfirmHandler | undefined;
  onAsk: AskHandler | undefined;
  readonly tools: Map<string, Tool>;
  addTools(...tools: Tool[]): void;
  /** Other members of `session/send` params (e.g. newer ones of the protocol) go through as given. */
  send(input: TurnInput, options?: SendOptions & Omit<Params<'session/send'>, 'sessionId' | 'input' | 'options'>): Promise<TurnResult>;
  /** The parked turn `resumeSession` found (`onDisconnect: "park"`), if any. */
  parked: Result<'session/resume'>['parkedTurn'];
  /** `session/continue`: goes on with the parked turn; resolves as `send` would have. */
  continueTurn(options?: { signal?: AbortSignalLike; timeout?: number }): Promise<TurnResult>;
  /** `session/park`: parks the running turn at its next wait for the client; resolves with the parked turn, if it parked. */
  park(options?: { signal?: AbortSignalLike; timeout?: number }): Promise<Result<'session/park'>['parked']>;
  stream(input: TurnInput, options?: Omit<SendOptions, 'timeout'> & Omit<Params<'session/send'>, 'sessionId' | 'input' | 'options'>): TurnStream;
  generate<T = unknown>(input: TurnInput, options: SendOptions & Omit<Params<'session/generate'>, 'sessionId' | 'input' | 'options' | 'schema'> & { schema: object }): Promise<GenerateResult<T>>;
  steer(input: TurnInput, options?: { images?: ImageAttachment[]; expectedTurnId?: string }): Promise<Result<'session/steer'>>;
  setApprovalRules(changes: Omit<Params<'session/setApprovalRules'>, 'sessionId'>): Promise<Result<'session/setApprovalRules'>>;
  rewind(options: Omit<Params<'session/rewind'>, 'sessionId'>): Promise<Result<'session/rewind'>>;
  /** `session/compact`: summarize the entries before the kept tail into one `summary` entry (or preview it). */
  compact(options?: Omit<Params<'session/compact'>, 'sessionId'>): Promise<Result<'session/compact'>>;
  /** `session/fork`: a new session from this one's transcript; its tool calls are answered by this session's functions. */
  fork(options?: Omit<Params<'session/fork'>, 'sessionId'>): Promise<Session>;
  cancel(): Promise<boolean>;
  confirm(callId: string, decision: boolean | ConfirmDecision,
    options?: Omit<Params<'session/confirm'>, 'sessionId' | 'callId' | 'decision'>): Promise<void>;
  getState(): Promise<SessionState>;
  getTranscript(): Promise<Transcript>;
  /** `session/getMedia`: a tool result's image or audio clip, named by a `toolOutput` entry's `media[i].sha256`, whole. */
  getMedia(sha256: string): Promise<Result<'session/getMedia'>>;
  /** `session/getPrompt`: one of an MCP server's prompts with its arguments filled in, as messages. */
  getPrompt(server: string, name: string, args?: Record<string, string>): Promise<Result<'session/getPrompt'>>;
  mutateTranscript(operations: TranscriptOperation | TranscriptOperation[], options?: { expectedRevision?: number }): Promise<MutationResult>;
  setProperties(changes: Omit<Params<'session/setProperties'>, 'sessionId'>): Promise<PropertiesResult>;
  events(): AsyncIterableIterator<TurnEvent>;
  close(): Promise<void>;
  delete(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class TurnStream implements AsyncIterableIterator<TurnEvent> {
  result: TurnResult | undefined;
  error: unknown;
  text: string;
  turnId: string | undefined;
  [Symbol.asyncIterator](): TurnStream;
  next(): Promise<IteratorResult<TurnEvent, undefined>>;
  /** Leaving the loop early: cancels a running turn and waits (bounded) for its end. */
  return(): Promise<IteratorResult<TurnEvent, undefined>>;
  finish(): Promise<TurnResult>;
}

// -- transcript operations ------------------------------------------------------------

type EntryOf<T extends TranscriptEntry['type']> = Extract<TranscriptEntry, { type: T }>;
type Ids = { id?: string };
export declare const ops: {
  remove(ids: string | string[]): Extract<TranscriptOperation, { op: 'remove' }>;
  truncateAfter(id: string | null): Extract<TranscriptOperation, { op: 'truncateAfter' }>;
  replace(id: string, entry: TranscriptEntry): Extract<TranscriptOperation, { op: 'replace' }>;
  insert(after: string | null, entries: TranscriptEntry | TranscriptEntry[]): Extract<TranscriptOperation, { op: 'insert' }>;
  set(entries: TranscriptEntry | TranscriptEntry[]): Extract<TranscriptOperation, { op: 'set' }>;
  prompt(text: string, options?: Ids & { images?: ImageAttachment[] }): EntryOf<'prompt'>;
  response(text: string, options?: Ids): EntryOf<'response'>;
  reasoning(text: string, options?: Ids): EntryOf<'reasoning'>;
  toolCalls(calls: EntryOf<'toolCalls'>['calls'] | EntryOf<'toolCalls'>['calls'][number], options?: Ids): EntryOf<'toolCalls'>;
  toolOutput(callId: string, name: string, content: unknown, options?: Ids & { outcome?: EntryOf<'toolOutput'>['outcome'] }): EntryOf<'toolOutput'>;
};
export declare function newId(): string;

// -- discovery and helpers ---------------------------------------------------------------

export declare const ENV_VAR: 'AGENTRPC_BIN';
export declare const BINARY_NAME: 'agentrpc';
/** The server binary the npm package carries (`bin/agentrpc` of the package); absent in a checkout. */
export declare const PACKAGED_BINARY: string;
export declare function findBinary(binary?: string, options?: { env?: Record<string, string | undefined>; start?: string; packaged?: string | null }): string;
export declare function repoBuildCandidates(start?: string): string[];
/** An inline model on the offline scripted provider (docs/protocol.md §15). */
export declare function scripted(...items: object[]): { provider: 'scripted'; model: 'scripted'; script: object[] };
