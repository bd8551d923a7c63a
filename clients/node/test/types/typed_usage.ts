// Typed use of the whole public API of the Node client, checked by
// `tsc -p clients/node/test/types/tsconfig.json` (lib es2022 only: a Node-only
// project) and `tsconfig.dom.json` (lib es2022 + dom) in scripts/test, and run
// against the real binary by clients/node/test/typed-usage.test.js.
//
// `expectType<T>()(value)` fails the check when a declaration loses a type
// (an event member that became `unknown`, a result that became `any`), and each
// `// @ts-expect-error` marks a line that must NOT compile: tsc reports an
// unused one (TS2578), so a declaration that grew too loose fails too.
//
// It imports the package by its name, as a project that installed it would, so
// package.json's `exports` and `types` are checked along with the declarations.

import {
  AgentRPCError,
  AgentRPCException,
  BINARY_NAME,
  BinaryNotFoundError,
  CancelledError,
  Client,
  ClientError,
  DEFAULT_CAPABILITIES,
  ENV_VAR,
  ERROR_CLASSES,
  ERROR_TABLE,
  EVENT_TYPES,
  InvalidConfigurationError,
  InvalidParamsError,
  InvalidTranscriptError,
  METHODS,
  PROTOCOL_VERSION,
  ProviderError,
  RevisionMismatchError,
  ServerExitedError,
  Session,
  SessionNotFoundError,
  ToolExecutorError,
  TurnStream,
  VERSION,
  conflict,
  decisionOf,
  denied,
  errorClassFor,
  errorFromWire,
  failed,
  findBinary,
  isTool,
  newId,
  ok,
  ops,
  registerErrorClasses,
  repoBuildCandidates,
  scripted,
  tool,
} from 'agentrpc';
import type {
  AbortSignalLike,
  ConfirmAnswer,
  ConfirmDecision,
  ConfirmationCall,
  ErrorKind,
  ErrorClass,
  EventOf,
  GenerateResult,
  HostAbortSignal,
  ProtocolVersion,
  SessionEventType,
  SpawnOptions,
  Tool,
  ToolContext,
  TurnEvent,
  TurnResult,
} from 'agentrpc';

/** `expectType<T>()(value)` compiles only when `value`'s type is exactly `T`. */
type Exactly<A, B> = (<X>() => X extends A ? 1 : 2) extends (<X>() => X extends B ? 1 : 2) ? true : false;
export function expectType<T>() {
  return <V>(value: V & (Exactly<V, T> extends true ? unknown : never)): V => value;
}

/**
 * Node has AbortController; a project with neither the dom lib nor @types/node
 * has no declaration of it, so it is taken from globalThis with the type the
 * client needs. (tsconfig.dom.json's file uses the dom lib's own.)
 */
const { AbortController: Controller } = globalThis as unknown as {
  AbortController: new () => { readonly signal: AbortSignalLike; abort(reason?: unknown): void };
};

// -- tools with typed arguments -----------------------------------------------------

interface WeatherArgs { city: string }

const weather = tool({
  name: 'get_weather',
  description: 'Current weather for a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  run: async ({ city }: WeatherArgs, ctx) => {
    expectType<string>()(city);
    expectType<ToolContext>()(ctx);
    expectType<HostAbortSignal>()(ctx.signal);
    expectType<Session>()(ctx.session);
    return { city, celsius: 18, sky: 'sunny' };
  },
});
expectType<Tool<WeatherArgs>>()(weather);

const undone: string[] = [];
/** Writes, with an undo that the server asks for when the turn fails. */
const write = tool({
  name: 'write',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  confirmation: 'never',
  run: ({ path }: { path: string }) => ok(`wrote ${path}`, { undo: () => { undone.push(path); } }),
});
/** Outcomes other than ok, chosen by the argument. */
const check = tool({
  name: 'check',
  run: ({ what }: { what: 'failed' | 'denied' | 'conflict' }) =>
    what === 'failed' ? failed('disk full') : what === 'denied' ? denied('not allowed') : conflict('changed meanwhile'),
});
/** A tool that throws: its turn ends with ToolExecutorError. */
const publish = tool({
  name: 'publish',
  run: ({ path }: { path: string }): never => { throw new Error(`no permission to publish ${path}`); },
});
/** A tool that needs a confirmation; the handler below decides. */
const deploy = tool({
  name: 'deploy',
  inputSchema: { type: 'object', properties: { env: { type: 'string' } }, required: ['env'] },
  confirmation: 'always',
  run: ({ env }: { env: string }) => `deployed to ${env}`,
});

// -- confirmation handlers ------------------------------------------------------------

const confirmations: string[] = [];
function onConfirm(call: ConfirmationCall): ConfirmAnswer {
  expectType<string>()(call.name);
  expectType<string>()(call.callId);
  const env = (call.arguments as { env?: string }).env;
  confirmations.push(`${call.name}(${env})`);
  return env === 'prod' ? { decision: 'deny', reason: 'not on a Friday' } : true;
}

// -- the whole run ----------------------------------------------------------------------

/** One pass over the API against a real server; returns what it saw, in order. */
export async function main(binary: string): Promise<string[]> {
  const seen: string[] = [];
  const options: SpawnOptions = { binary, onConfirm, stderr: 'collect', shutdownTimeout: 5000 };
  const client = await Client.spawn(options);
  try {
    expectType<number | undefined>()(client.protocolVersion);

    // send: a tool call and its answer, typed as TurnResult.
    const session = await client.openSession({
      model: scripted(
        { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] },
        { text: ['It is ', '18 °C in Paris.'], usage: { inputTokens: 42, outputTokens: 9 } },
        { text: ['Streaming ', 'works.'] },
        { text: ['{"city": "Paris", "celsius": 18}'] },
      ),
      tools: [weather],
      limits: { maxToolCalls: 4 },
    });
    expectType<string>()(session.id);
    const result = await session.send("What's the weather in Paris?");
    expectType<TurnResult>()(result);
    expectType<string>()(result.message.text);
    seen.push(`send: ${result.message.text} (${result.toolCalls} tool call, ${result.usage.inputTokens} in)`);

    // stream: narrowing on event.type.
    const stream = session.stream('And now stream it.');
    expectType<TurnStream>()(stream);
    const types: SessionEventType[] = [];
    for await (const event of stream) {
      expectType<TurnEvent>()(event);
      types.push(event.type);
      if (event.type === 'textDelta') expectType<string>()(event.delta);
      if (event.type === 'toolCallFinished') expectType<EventOf<'toolCallFinished'>['outcome']>()(event.outcome);
      if (event.type === 'turnEnded') expectType<string | undefined>()(event.turnId);
      // @ts-expect-error a misspelled event type
      if (event.type === 'textDelt') break;
      // @ts-expect-error `delta` exists on textDelta events only
      void event.delta;
    }
    const streamed = stream.result;
    expectType<TurnResult | undefined>()(streamed);
    seen.push(`stream: ${stream.text} (${types.filter((t) => t === 'textDelta').length} text deltas, ended: ${types.includes('turnEnded')})`);

    // generate: `value` typed by the caller.
    const generated = await session.generate<{ city: string; celsius: number }>('As JSON.', {
      schema: { type: 'object', properties: { city: { type: 'string' }, celsius: { type: 'number' } }, required: ['city', 'celsius'] },
    });
    expectType<GenerateResult<{ city: string; celsius: number }>>()(generated);
    seen.push(`generate: ${generated.value.city} ${generated.value.celsius}`);

    // confirmation and undo: deploy asks, the handler approves staging and denies
    // prod; write records an undo that runs when publish fails the turn.
    const ops1 = await client.openSession({
      model: scripted(
        { toolCalls: [{ name: 'deploy', arguments: { env: 'staging' } }, { name: 'deploy', arguments: { env: 'prod' } }] },
        { toolCalls: [{ name: 'check', arguments: { what: 'conflict' } }] },
        { toolCalls: [{ name: 'write', arguments: { path: 'index.md' } }] },
        { toolCalls: [{ name: 'publish', arguments: { path: 'index.md' } }] },
      ),
      tools: [deploy, check, write, publish],
      onConfirm,
    });
    const outcomes: string[] = [];
    try {
      for await (const event of ops1.stream('Deploy, write and publish.')) {
        if (event.type === 'toolCallFinished') outcomes.push(`${event.name}: ${event.outcome}`);
      }
    } catch (error) {
      if (!(error instanceof ToolExecutorError)) throw error;
      expectType<string | undefined>()(error.toolName);
      seen.push(`tool error in ${error.toolName}: ${error.cause instanceof Error ? error.cause.message : String(error.cause)}`);
    }
    seen.push(`confirmations: ${confirmations.join(', ')}`);
    seen.push(`outcomes: ${outcomes.join(', ')}`);
    seen.push(`undone: ${undone.join(', ')}`);

    // typed errors: instanceof narrows, `kind` is the wire's.
    try {
      await client.session('s-no-such-session').getState();
    } catch (error) {
      if (!(error instanceof SessionNotFoundError)) throw error;
      expectType<'sessionNotFound'>()(SessionNotFoundError.kind);
      seen.push(`error: ${error.kind} (${error.code}), an AgentRPCError: ${error instanceof AgentRPCError}`);
    }
    try {
      await session.mutateTranscript(ops.truncateAfter(null), { expectedRevision: 0 });
    } catch (error) {
      if (error instanceof RevisionMismatchError) seen.push(`error: ${error.kind}, expected ${String(error.data.expectedRevision)}`);
      else throw error;
    }
    // Kinds that share a code: the subclass is caught by its base.
    const decoded = errorFromWire({ code: -32602, message: 'bad history', data: { kind: 'invalidTranscript' } });
    if (decoded instanceof InvalidParamsError) {
      expectType<'invalidParams' | 'invalidTranscript' | 'invalidConfiguration'>()(InvalidParamsError.kind);
      seen.push(`decoded: ${decoded.constructor.name}, kind ${decoded.kind}, also InvalidParamsError`);
    }
    // A kind this client does not know arrives as the class of its code with the
    // wire's kind, which is why that class's instances may carry any string.
    const newer = errorFromWire({ code: -32602, message: 'from a newer server', data: { kind: 'someNewerKind' } });
    if (newer instanceof InvalidParamsError) {
      expectType<'invalidParams' | 'invalidTranscript' | 'invalidConfiguration' | (string & {}) | undefined>()(newer.kind);
      seen.push(`newer kind: ${newer.constructor.name}, kind ${String(newer.kind)}`);
    }
    expectType<'invalidTranscript'>()(new InvalidTranscriptError('bad history').kind);
    expectType<'invalidTranscript'>()(InvalidTranscriptError.kind);
    expectType<'invalidConfiguration'>()(InvalidConfigurationError.kind);
    const anyError: unknown = decoded;
    if (anyError instanceof ProviderError) {
      expectType<'retryWithBackoff' | 'refreshAuthThenRetry' | 'none'>()(anyError.retryGuidance.kind);
      expectType<boolean>()(anyError.isRetryable);
    }
    if (anyError instanceof ServerExitedError) expectType<string>()(anyError.stderrTail);
    if (anyError instanceof BinaryNotFoundError) expectType<string[]>()(anyError.searched);
    const families: [boolean, boolean] = [anyError instanceof ClientError, anyError instanceof AgentRPCException];
    seen.push(`families: client ${families[0]}, exception ${families[1]}`);
    const kinds: readonly ErrorKind[] = ERROR_TABLE.map((row) => row.kind);
    seen.push(`tables: cancelled is a kind ${kinds.includes('cancelled')}, textDelta an event ${EVENT_TYPES.includes('textDelta')}`);

    // cancellation: aborting the signal withdraws the send.
    const slow = await client.openSession({ model: scripted({ text: ['Once upon ', 'a time'], stall: true }) });
    const controller = new Controller();
    const watch = slow.events();
    const pending = slow.send('Tell me a story.', { signal: controller.signal });
    for await (const event of watch) if (event.type === 'textDelta' && event.delta === 'a time') break;
    controller.abort();
    try {
      await pending;
    } catch (error) {
      if (!(error instanceof CancelledError)) throw error;
      expectType<string | undefined>()(error.partialText);
      seen.push(`cancelled: ${JSON.stringify(error.partialText)}`);
    }
    const cancelledNothing = await slow.cancel();
    expectType<boolean>()(cancelledNothing);

    // the rest of a session's life: transcript, properties, the list, close.
    const transcript = await session.getTranscript();
    const first = transcript.entries[0];
    if (first?.type === 'prompt') expectType<string>()(first.text);
    const properties = await session.setProperties({ set: { city: 'Paris' } });
    const listed = await client.listSessions({ limit: 50 });
    seen.push(`session: ${transcript.entries.length} entries, city ${String(properties.properties.city)}, listed ${listed.data.some((s) => s.sessionId === session.id)}`);
    await session.close();
  } finally {
    await client.close();
  }
  return seen;
}

// -- the rest of the API, type-checked only ------------------------------------------------

/** Calls a live session would make; checked for their types, not run. */
export async function surface(client: Client, session: Session): Promise<void> {
  const resumed = await client.resumeSession(session.id, { tools: [weather] });
  expectType<Session>()(resumed);
  const deferred = await client.resumeSession(session.id, {
    startMCPServers: false,
    mcpServers: ['github', { name: 'docs', type: 'http', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer ${DOCS_TOKEN}' } }],
  });
  expectType<Session>()(deferred);
  const withServers = await client.openSession({
    model: 'gpt',
    mcpServers: ['github', { name: 'files', command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv'], env: { LOG_LEVEL: 'warn' } }],
  });
  expectType<Session>()(withServers);
  const forked = await session.fork();
  expectType<Session>()(forked);
  const { turnId } = await session.steer('Also check Rome.', { expectedTurnId: 't-1' });
  expectType<string>()(turnId);
  const rewound = await session.rewind({ turnId, undo: true });
  expectType<number>()(rewound.revision);
  await session.setApprovalRules({ add: [{ tool: 'deploy', arguments: { env: 'staging' } }] });
  await session.confirm('call-1', 'approve', { reason: 'looks fine' });
  await session.confirm('call-2', false);
  await session.mutateTranscript([ops.remove('e-1'), ops.insert(null, ops.prompt('Hello'))], { expectedRevision: 3 });
  for await (const event of session.events()) {
    if (event.type === 'turnEnded') break;
  }
  const state = await client.request('session/getState', { sessionId: session.id });
  expectType<boolean>()(state.isRunning);
  const stop = client.onNotification('session/event', (params) => { expectType<string>()(params.sessionId); });
  stop();
  client.onRequest('hook/call', (params, { signal }) => {
    expectType<HostAbortSignal>()(signal);
    return { params };
  });
  session.onAsk = (question) => question.options?.[0] ?? 'no idea';
  await session.delete();

  // The helpers and tables beside the classes.
  expectType<boolean>()(isTool(weather));
  expectType<{ decision: ConfirmDecision; reason?: string }>()(decisionOf({ approve: false, reason: 'no' }));
  expectType<string>()(findBinary(undefined, { env: { [ENV_VAR]: '/opt/agentrpc' } }));
  expectType<string[]>()(repoBuildCandidates());
  expectType<'agentrpc'>()(BINARY_NAME);
  expectType<string>()(newId());
  expectType<string>()(VERSION);
  expectType<ProtocolVersion>()(PROTOCOL_VERSION);
  expectType<boolean | undefined>()(DEFAULT_CAPABILITIES.tools);
  expectType<'clientToServer' | 'serverToClient'>()(METHODS[0]!.direction);
  expectType<ErrorClass>()(errorClassFor(-32602, 'invalidTranscript'));
  registerErrorClasses(ERROR_CLASSES);
}

// -- lines that must not compile ---------------------------------------------------------
//
// Never called (they would fail at run time too); each line is a mistake the
// declarations must catch.

export function mustNotCompile(session: Session, ctx: ToolContext): unknown[] {
  return [
    // @ts-expect-error a wrong argument type: get_weather's city is a string
    weather.run({ city: 18 }, ctx),
    // @ts-expect-error a misspelled member of a tool definition (runn)
    tool({ name: 'typo', runn: () => 1 }),
    // @ts-expect-error a wrong argument type: the input is a string or {text, images}
    session.send(42),
    // @ts-expect-error a signal must be an AbortSignal, not a boolean
    session.send('x', { signal: true }),
    // @ts-expect-error stderr takes 'collect', 'inherit' or a function
    Client.spawn({ stderr: 'pipe' }),
    // @ts-expect-error a decision word the protocol does not have
    session.confirm('call-1', 'maybe'),
    // @ts-expect-error InvalidTranscriptError's kind is not invalidParams
    ((kind: 'invalidParams') => kind)(InvalidTranscriptError.kind),
    // @ts-expect-error an answer of a confirmation handler is not a number
    ((answer: ConfirmAnswer) => answer)(1),
  ];
}

/** What `main` sees against the real binary, checked by typed-usage.test.js. */
export const EXPECTED: readonly string[] = [
  'send: It is 18 °C in Paris. (1 tool call, 42 in)',
  'stream: Streaming works. (2 text deltas, ended: true)',
  'generate: Paris 18',
  'tool error in publish: no permission to publish index.md',
  'confirmations: deploy(staging), deploy(prod)',
  'outcomes: deploy: ok, deploy: denied, check: conflict, write: ok',
  'undone: index.md',
  'error: sessionNotFound (-32010), an AgentRPCError: true',
  'error: revisionMismatch, expected 0',
  'decoded: InvalidTranscriptError, kind invalidTranscript, also InvalidParamsError',
  'newer kind: InvalidParamsError, kind someNewerKind',
  'families: client false, exception true',
  'tables: cancelled is a kind true, textDelta an event true',
  'cancelled: "Once upon a time"',
  'session: 8 entries, city Paris, listed true',
];
