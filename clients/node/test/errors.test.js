// Every error class: decoding from the wire, the hierarchy, the accessors, and
// the errors the real server answers with, reached through the client.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as api from '../src/index.js';
import {
  AgentRPCError, AgentRPCException, AlreadyRunningError, CancelledError, ClientError, ERROR_CLASSES, ERROR_TABLE,
  InvalidConfigurationError, InvalidParamsError, InvalidRequestError, InvalidTranscriptError, MaxRoundTripsExceededError,
  MaxToolCallsExceededError, MessageTooLargeError, MethodNotFoundError, OverloadedError, ProviderError,
  RunLimitExceededError, SessionBusyError, SessionNotFoundError, ToolChoiceNotHonoredError, ToolExecutorError,
  WallClockTimeoutExceededError, errorFromWire, ops, scripted,
} from '../src/index.js';
import { nextMatching, objectSchema, spawnReal, within } from '../test-support/helpers.js';

describe('error classes', () => {
  test('one class per kind of the error table, exported under its name, decoded from the wire', () => {
    assert.equal(ERROR_CLASSES.length, ERROR_TABLE.length);
    for (const row of ERROR_TABLE) {
      const cls = api[row.className];
      assert.equal(typeof cls, 'function', `${row.className} is exported`);
      assert.equal(cls.kind, row.kind);
      assert.equal(cls.code, row.code);
      const error = errorFromWire({ code: row.code, message: `m-${row.kind}`, data: { kind: row.kind, extra: 1 } });
      assert.equal(error.constructor, cls, `${row.kind} decodes to ${row.className}`);
      assert.ok(error instanceof AgentRPCError && error instanceof AgentRPCException && error instanceof Error);
      assert.equal(error.code, row.code);
      assert.equal(error.kind, row.kind);
      assert.equal(error.message, `m-${row.kind}`);
      assert.equal(error.name, row.className);
      assert.deepEqual(error.data, { kind: row.kind, extra: 1 });
      assert.deepEqual(error.toJSON(), { code: row.code, message: `m-${row.kind}`, data: { kind: row.kind, extra: 1 } });
      const made = new cls('made here', { field: 'x' });
      assert.equal(made.kind, row.kind);
      assert.equal(made.code, row.code);
      assert.equal(made.data.field, 'x');
    }
  });

  test('kinds that share a code are subclasses of the first, so catching the broader one works', () => {
    assert.ok(new MessageTooLargeError() instanceof InvalidRequestError);
    assert.ok(new InvalidTranscriptError() instanceof InvalidParamsError);
    assert.ok(new InvalidConfigurationError() instanceof InvalidParamsError);
    for (const cls of [MaxToolCallsExceededError, MaxRoundTripsExceededError, WallClockTimeoutExceededError]) {
      const error = errorFromWire({ code: cls.code, message: '', data: { kind: cls.kind, limit: 2 } });
      assert.ok(error instanceof RunLimitExceededError);
      assert.equal(error.limit, 2);
    }
  });

  test('an unknown kind falls back to the class of its code, then to AgentRPCError, keeping the wire kind', () => {
    const byCode = errorFromWire({ code: -32602, message: 'x', data: { kind: 'brandNew' } });
    assert.equal(byCode.constructor, InvalidParamsError);
    assert.equal(byCode.kind, 'brandNew');
    const unknown = errorFromWire({ code: -31999, message: 'y', data: { kind: 'other' } });
    assert.equal(unknown.constructor, AgentRPCError);
    assert.equal(unknown.kind, 'other');
    const noKind = errorFromWire({ code: -32000, message: 'z' });
    assert.equal(noKind.kind, undefined);
    assert.deepEqual(noKind.data, {});
    const noKindKnownCode = errorFromWire({ code: -32601, message: 'w' });
    assert.equal(noKindKnownCode.constructor, MethodNotFoundError);
    assert.equal(noKindKnownCode.kind, undefined);
    const malformed = errorFromWire('nonsense');
    assert.equal(malformed.code, -32603);
    assert.match(malformed.message, /malformed error object/);
    assert.deepEqual(errorFromWire({ code: 1, message: '', data: [1] }).data, { value: [1] });
  });

  test('provider errors carry retryGuidance, isRetryable and requiresUserAction', () => {
    const error = errorFromWire({
      code: -32050, message: 'rate limited',
      data: { kind: 'providerError', provider: { code: 'rateLimited', httpStatus: 429, isRetryable: true, requiresUserAction: false,
        retryGuidance: { kind: 'retryWithBackoff', afterSeconds: 2 }, safeDescription: 'slow down', unsafeMessage: '' } },
    });
    assert.ok(error instanceof ProviderError);
    assert.deepEqual(error.retryGuidance, { kind: 'retryWithBackoff', afterSeconds: 2 });
    assert.equal(error.isRetryable, true);
    assert.equal(error.requiresUserAction, false);
    assert.equal(error.providerCode, 'rateLimited');
    assert.equal(error.httpStatus, 429);
    assert.equal(error.safeDescription, 'slow down');
    const bare = new ProviderError('no details');
    assert.deepEqual(bare.retryGuidance, { kind: 'none' });
    assert.equal(bare.isRetryable, false);
  });

  test('local failures are ClientErrors, not AgentRPCErrors', () => {
    for (const cls of [api.ConnectionClosedError, api.ServerExitedError, api.RequestTimeoutError, api.BinaryNotFoundError]) {
      assert.ok(cls.prototype instanceof ClientError && !(cls.prototype instanceof AgentRPCError), cls.name);
    }
  });
});

describe('errors the real server answers with', () => {
  test('sessionNotFound, invalidParams, invalidConfiguration, methodNotFound', async () => {
    const client = await spawnReal();
    try {
      await assert.rejects(client.session('s-missing').getState(), SessionNotFoundError);
      await assert.rejects(client.request('session/getState', {}), InvalidParamsError);
      await assert.rejects(client.openSession({ model: { provider: 'nope' } }), InvalidConfigurationError);
      const missing = await client.request('no/such', {}).catch((e) => e);
      assert.ok(missing instanceof MethodNotFoundError);
      assert.equal(missing.data.method, 'no/such');
    } finally {
      await client.close();
    }
  });

  test('alreadyRunning and sessionBusy while a turn runs', async () => {
    const client = await spawnReal();
    try {
      const session = await client.openSession({ model: scripted({ stall: true, text: ['x'] }) });
      const watch = session.events();
      const running = session.send('one').catch((e) => e);
      const started = await nextMatching(watch, (e) => e.type === 'turnStarted', 10000, 'turnStarted');
      const busy = await session.send('two').catch((e) => e);
      assert.ok(busy instanceof AlreadyRunningError);
      assert.equal(busy.data.turnId, started.turnId);
      await assert.rejects(session.mutateTranscript(ops.truncateAfter(null)), SessionBusyError);
      await session.cancel();
      assert.ok((await within(running, 10000, 'the cancelled turn')) instanceof CancelledError);
      await watch.return();
    } finally {
      await client.close();
    }
  });

  test('limits, provider errors, tool choice and invalid transcripts end turns with their classes', async () => {
    const client = await spawnReal();
    try {
      const call = { toolCalls: [{ name: 'echo', arguments: {} }] };
      const echo = api.tool({ name: 'echo', inputSchema: objectSchema({}), run: () => 'e' });
      const limited = await client.openSession({ model: scripted(call, call, { text: ['x'] }), tools: [echo], limits: { maxToolCalls: 1 } });
      const limit = await limited.send('go').catch((e) => e);
      assert.ok(limit instanceof MaxToolCallsExceededError && limit instanceof RunLimitExceededError, String(limit));
      assert.equal(limit.limit, 1);
      assert.equal(typeof limit.turnId, 'string');

      const rounds = await client.openSession({ model: scripted(call, call, { text: ['x'] }), tools: [echo], limits: { maxRoundTrips: 1 } });
      assert.ok((await rounds.send('go').catch((e) => e)) instanceof MaxRoundTripsExceededError);

      const failing = await client.openSession({ model: scripted({ error: { code: 'authExpired' } }) });
      const provider = await failing.send('go').catch((e) => e);
      assert.ok(provider instanceof ProviderError, String(provider));
      assert.equal(provider.providerCode, 'authExpired');
      assert.equal(provider.retryGuidance.kind, 'refreshAuthThenRetry');
      assert.equal(provider.isRetryable, provider.data.provider.isRetryable);
      assert.equal(typeof provider.requiresUserAction, 'boolean');

      const chooser = await client.openSession({ model: scripted({ text: ['no tool'] }), tools: [echo], toolChoice: 'required' });
      assert.ok((await chooser.send('go').catch((e) => e)) instanceof ToolChoiceNotHonoredError);

      const editing = await client.openSession({ model: scripted({ text: ['x'] }) });
      await assert.rejects(editing.mutateTranscript(ops.insert(null, ops.toolOutput('nope', 'echo', 1))), InvalidTranscriptError);
    } finally {
      await client.close();
    }
  });

  test('overloaded when the server holds its maximum of sessions', async () => {
    const client = await spawnReal({ args: ['--max-sessions', '1'] });
    try {
      const first = await client.openSession({});
      await assert.rejects(client.openSession({}), OverloadedError);
      await first.close();
      await client.openSession({});
    } finally {
      await client.close();
    }
  });

  test('a tool function that is not registered is answered methodNotFound and the turn fails with ToolExecutorError', async () => {
    const client = await spawnReal();
    try {
      const session = await client.openSession({ model: scripted({ toolCalls: [{ name: 'ghost', arguments: {} }] }), tools: [{ name: 'ghost' }] });
      const error = await session.send('go').catch((e) => e);
      assert.ok(error instanceof ToolExecutorError);
      assert.ok(error.clientError instanceof MethodNotFoundError);
      assert.match(error.clientError.message, /no function is registered for tool "ghost"/);
    } finally {
      await client.close();
    }
  });
});
