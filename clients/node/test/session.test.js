// Every Session method against the real binary on the scripted provider.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  CancelledError, InvalidParamsError, NoPendingConfirmationError, RevisionMismatchError, SessionNotFoundError,
  StructuredOutputError, failed, ops, scripted, tool,
} from '../src/index.js';
import { MCP_SERVER, collect, nextMatching, objectSchema, spawnReal, within } from '../test-support/helpers.js';

const add = tool({
  name: 'add',
  description: 'Add two numbers',
  inputSchema: objectSchema({ a: { type: 'number' }, b: { type: 'number' } }),
  run: ({ a, b }) => a + b,
});

describe('Session against the real binary', () => {
  let client;
  before(async () => { client = await spawnReal(); });
  after(async () => { await client.close(); });

  test('send runs a tool and resolves with a typed TurnResult', async () => {
    const seen = [];
    const spy = tool({ ...add.spec, run: (args, ctx) => { seen.push({ args, ctx }); return args.a + args.b; } });
    const session = await client.openSession({
      model: scripted({ toolCalls: [{ name: 'add', arguments: { a: 2, b: 3 }, id: 'c1' }] }, { text: ['It is ', '5.'] }),
      instructions: 'Add.',
      tools: [spy],
    });
    assert.equal(session.revision, 0);
    assert.equal(session.activeProfile, 'default');
    const result = await session.send('2 + 3?');
    assert.equal(result.message.text, 'It is 5.');
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.toolCalls, 1);
    assert.equal(result.roundTrips, 2);
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0].args, { a: 2, b: 3 });
    assert.equal(seen[0].ctx.callId, 'c1');
    assert.equal(seen[0].ctx.name, 'add');
    assert.equal(seen[0].ctx.turnId, result.turnId);
    // The key names the call for good: session, turn, round trip, call id.
    assert.equal(seen[0].ctx.idempotencyKey, `${session.id}/${result.turnId}/1/c1`);
    assert.equal(seen[0].ctx.session, session);
    assert.ok(seen[0].ctx.signal instanceof AbortSignal);
    const transcript = await session.getTranscript();
    const output = transcript.entries.find((e) => e.type === 'toolOutput');
    assert.equal(output.content, 5);
    assert.equal(transcript.instructions, 'Add.');
  });

  test('getMedia gives back whole the image a tool result named', async () => {
    const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
    const shot = tool({
      name: 'screenshot', description: 'Takes a screenshot', inputSchema: objectSchema({}),
      run: () => [{ type: 'text', text: 'the screen:' }, { type: 'image', mimeType: 'image/png', data: pixel }],
    });
    const session = await client.openSession({
      model: scripted({ toolCalls: [{ name: 'screenshot', arguments: {}, id: 'c1' }] }, { text: ['A red pixel.'] }), tools: [shot],
    });
    const events = await collect(session.stream('look'));
    const finished = events.find((e) => e.type === 'toolCallFinished');
    assert.deepEqual(finished.media, [{ type: 'image', mimeType: 'image/png', data: pixel }]);
    // The transcript names it by digest; getMedia reads it back as the event carried it.
    const output = (await session.getTranscript()).entries.find((e) => e.type === 'toolOutput');
    assert.equal(output.media.length, 1);
    assert.deepEqual(await session.getMedia(output.media[0].sha256), finished.media[0]);
    await assert.rejects(session.getMedia('0'.repeat(64)), InvalidParamsError);
  });

  test('stream yields typed events in order, then holds the result', async () => {
    const session = await client.openSession({ model: scripted({ reasoning: ['Hm'], text: ['Hel', 'lo'], usage: { inputTokens: 3, outputTokens: 2 } }) });
    const stream = session.stream('hi');
    const events = await collect(stream);
    const types = events.map((e) => e.type);
    assert.deepEqual(types, ['turnStarted', 'entryAppended', 'requestStarted', 'reasoningDelta', 'textDelta', 'textDelta', 'usage', 'entryAppended', 'entryAppended', 'turnEnded']);
    assert.ok(events.every((e) => e.sessionId === session.id && e.turnId === stream.turnId && Number.isInteger(e.seq)));
    assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => events[0].seq + i));
    assert.equal(stream.text, 'Hello');
    assert.equal(stream.result.message.text, 'Hello');
    assert.equal(events.at(-1).status, 'completed');
    assert.equal(events.find((e) => e.type === 'usage').inputTokens, 3);
  });

  test('a stream starts its turn at the first next(); one never iterated sends nothing', async () => {
    const session = await client.openSession({ model: scripted({ text: ['late'] }) });
    const stream = session.stream('hi');
    assert.equal((await session.getState()).turnId, undefined, 'creating a stream sends nothing');
    const first = await within(stream.next(), 10000, 'the first event');
    assert.equal(first.value.type, 'turnStarted');
    assert.equal((await stream.finish()).message.text, 'late');
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
  });

  test('leaving a stream early cancels the turn, and the session takes the next turn at once', async () => {
    const session = await client.openSession({ model: scripted({ stall: true, text: ['Par', 'tial'] }, { text: ['Fresh'] }) });
    const stream = session.stream('go');
    let deltas = 0;
    for await (const event of stream) {
      if (event.type === 'textDelta') deltas += 1;
      if (deltas === 2) break;
    }
    const state = await session.getState();
    assert.equal(state.isRunning, false, 'the turn is over once the loop is left');
    assert.equal(state.currentText, 'Partial');
    const transcript = await session.getTranscript();
    assert.deepEqual(transcript.entries.map((e) => e.type), ['prompt'], 'no response was appended');
    assert.equal((await session.send('again')).message.text, 'Fresh');
  });

  test('a throw inside the loop cancels the turn too', async () => {
    const session = await client.openSession({ model: scripted({ stall: true, text: ['x'] }) });
    await assert.rejects(async () => {
      for await (const event of session.stream('go')) {
        if (event.type === 'textDelta') throw new Error('consumer failed');
      }
    }, /consumer failed/);
    assert.equal((await session.getState()).isRunning, false);
  });

  test('an AbortSignal cancels a send with $/cancelRequest; the error keeps the partial text', async () => {
    const session = await client.openSession({ model: scripted({ stall: true, text: ['Par'] }) });
    const controller = new AbortController();
    const watch = session.events();
    const pending = session.send('x', { signal: controller.signal });
    await nextMatching(watch, (e) => e.type === 'textDelta', 10000, 'the first delta');
    controller.abort();
    const error = await within(pending.catch((e) => e), 10000, 'the cancelled send');
    assert.ok(error instanceof CancelledError, String(error));
    assert.equal(error.kind, 'cancelled');
    assert.equal(error.code, -32800);
    assert.equal(error.partialText, 'Par');
    assert.equal(error.data.source, '$/cancelRequest');
    assert.equal(error.cause, controller.signal.reason);
    const ended = await nextMatching(watch, (e) => e.type === 'turnEnded', 10000, 'turnEnded');
    assert.equal(ended.status, 'cancelled');
    await watch.return();
  });

  test('an already aborted signal sends nothing', async () => {
    const session = await client.openSession({ model: scripted({ text: ['unused'] }) });
    const reason = new Error('not wanted');
    await assert.rejects(session.send('x', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    assert.equal((await session.getState()).turnId, undefined);
  });

  test('an AbortSignal passed to stream() cancels the streamed turn', async () => {
    const session = await client.openSession({ model: scripted({ stall: true, text: ['a'] }) });
    const controller = new AbortController();
    const stream = session.stream('go', { signal: controller.signal });
    const error = await within((async () => {
      try {
        for await (const event of stream) if (event.type === 'textDelta') controller.abort();
      } catch (e) { return e; }
      return undefined;
    })(), 10000, 'the aborted stream');
    assert.ok(error instanceof CancelledError);
    assert.equal(stream.error, error);
  });

  test('cancel() stops the running turn cooperatively', async () => {
    const session = await client.openSession({ model: scripted({ stall: true, text: ['Lo'] }) });
    const watch = session.events();
    const pending = session.send('go').catch((e) => e);
    await nextMatching(watch, (e) => e.type === 'textDelta', 10000, 'the delta');
    assert.equal(await session.cancel(), true);
    const error = await within(pending, 10000, 'the cancelled send');
    assert.ok(error instanceof CancelledError);
    assert.equal(error.data.source, 'session/cancel');
    assert.equal(await session.cancel(), false, 'nothing runs any more');
    await watch.return();
  });

  test('confirm() answers a confirmationRequested event; a wrong call id is NoPendingConfirmationError', async () => {
    const rm = tool({ name: 'rm', inputSchema: objectSchema({ path: { type: 'string' } }), confirmation: 'always', run: () => 'removed' });
    const session = await client.openSession({ model: scripted({ toolCalls: [{ name: 'rm', arguments: { path: '/tmp/x' } }] }, { text: ['Removed.'] }), tools: [rm] });
    const stream = session.stream('Remove it');
    const types = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'confirmationRequested') {
        assert.equal(event.name, 'rm');
        assert.deepEqual(event.arguments, { path: '/tmp/x' });
        await assert.rejects(session.confirm('nope', true), NoPendingConfirmationError);
        await session.confirm(event.callId, 'approve');
      }
      if (event.type === 'confirmationResolved') assert.equal(event.source, 'client');
    }
    assert.ok(types.includes('confirmationResolved'));
    assert.equal(stream.result.message.text, 'Removed.');
  });

  test('onConfirm per session wins over the client one; a denial reaches the model with its reason', async () => {
    const asked = [];
    client.onConfirm = () => { asked.push('client'); return true; };
    try {
      let ran = false;
      const rm = tool({ name: 'rm', inputSchema: objectSchema({}), confirmation: 'always', run: () => { ran = true; return 'removed'; } });
      const session = await client.openSession({
        model: scripted({ toolCalls: [{ name: 'rm', arguments: {} }] }, { text: ['OK.'] }),
        tools: [rm],
        onConfirm: (call) => { asked.push(`session:${call.name}:${call.session === session}`); return { decision: 'deny', reason: 'not today' }; },
      });
      await session.send('go');
      assert.equal(ran, false);
      assert.deepEqual(asked, ['session:rm:true']);
      const output = (await session.getTranscript()).entries.find((e) => e.type === 'toolOutput');
      assert.equal(output.outcome, 'denied');
      assert.match(output.content, /not today/);

      const other = await client.openSession({ model: scripted({ toolCalls: [{ name: 'rm', arguments: {} }] }, { text: ['Done.'] }), tools: [rm] });
      await other.send('go');
      assert.equal(ran, true);
      assert.deepEqual(asked, ['session:rm:true', 'client']);
    } finally {
      client.onConfirm = undefined;
    }
  });

  test('generate returns the structured value; a schema violation is StructuredOutputError', async () => {
    const schema = objectSchema({ city: { type: 'string' }, celsius: { type: 'number' } });
    const session = await client.openSession({ model: scripted({ text: ['{"city": "Paris", "celsius": 18}'] }, { text: ['{"city": 3}'] }) });
    const result = await session.generate('Weather?', { schema });
    assert.deepEqual(result.value, { city: 'Paris', celsius: 18 });
    assert.equal(typeof result.turnId, 'string');
    const error = await session.generate('Again?', { schema }).catch((e) => e);
    assert.ok(error instanceof StructuredOutputError, String(error));
    assert.equal(error.data.reason, 'schemaViolation');
    assert.throws(() => session.generate('x', {}), TypeError);
  });

  test('mutateTranscript with ops, expectedRevision, and RevisionMismatchError', async () => {
    const session = await client.openSession({ model: scripted({ text: ['one'] }, { text: ['two'] }) });
    await session.send('first');
    const before = await session.getTranscript();
    const result = await session.mutateTranscript([
      ops.replace(before.entries[1].id, ops.response('ONE', { id: before.entries[1].id })),
      ops.insert(null, [ops.prompt('earlier'), ops.response('ok')]),
    ], { expectedRevision: before.revision });
    assert.equal(result.entryCount, 4);
    assert.ok(result.revision > before.revision);
    const edited = await session.getTranscript();
    assert.deepEqual(edited.entries.map((e) => e.text), ['earlier', 'ok', 'first', 'ONE']);
    await assert.rejects(session.mutateTranscript(ops.truncateAfter(null), { expectedRevision: before.revision }), RevisionMismatchError);
    await session.mutateTranscript(ops.remove(edited.entries.slice(0, 2).map((e) => e.id)));
    await session.mutateTranscript(ops.set([ops.prompt('only'), ops.response('this')]));
    assert.deepEqual((await session.getTranscript()).entries.map((e) => e.text), ['only', 'this']);
    await session.mutateTranscript(ops.truncateAfter(null));
    assert.equal((await session.getState()).entryCount, 0);
  });

  test('setProperties sets and removes, and emits propertiesChanged outside a turn', async () => {
    const session = await client.openSession({ model: scripted({ text: ['x'] }), properties: { a: 1 } });
    const watch = session.events();
    const result = await session.setProperties({ set: { mode: 'plan' }, remove: ['a'] });
    assert.deepEqual(result.properties, { mode: 'plan' });
    const event = await nextMatching(watch, (e) => e.type === 'propertiesChanged', 5000, 'propertiesChanged');
    assert.deepEqual(event.set, { mode: 'plan' });
    assert.deepEqual(event.removed, ['a']);
    assert.equal(event.turnId, undefined);
    await watch.return();
    assert.deepEqual((await session.getState()).properties, { mode: 'plan' });
  });

  test('tool outcomes: failed() reaches the model as a failed output', async () => {
    const flaky = tool({ name: 'flaky', inputSchema: objectSchema({}), run: () => failed('disk full') });
    const session = await client.openSession({ model: scripted({ toolCalls: [{ name: 'flaky', arguments: {} }] }, { text: ['Sorry.'] }), tools: [flaky] });
    const events = await collect(session.stream('go'));
    const finished = events.find((e) => e.type === 'toolCallFinished');
    assert.equal(finished.outcome, 'failed');
    assert.equal(finished.content, 'disk full');
  });

  test('fork() makes a new session from the transcript, answering its tool calls with the same functions', async () => {
    const session = await client.openSession({
      model: scripted({ text: ['one'] }, { toolCalls: [{ name: 'add', arguments: { a: 2, b: 2 } }] }, { text: ['four'] }), tools: [add],
    });
    await session.send('first');
    const fork = await session.fork();
    assert.notEqual(fork.id, session.id);
    assert.ok(fork.tools.has('add'));
    assert.deepEqual((await fork.getTranscript()).entries.map((e) => e.text), ['first', 'one']);
  });

  test('close() unloads the session; later calls are SessionNotFoundError', async () => {
    const session = await client.openSession({ model: scripted({ text: ['x'] }) });
    await session.close();
    await assert.rejects(session.getState(), SessionNotFoundError);
  });
});

describe('parked turns', () => {
  test('session.park() parks a turn whose tool call waits; continueTurn sends the call again', async () => {
    const client = await spawnReal();
    try {
      const seen = [];
      let held;
      const heldCall = new Promise((resolve) => { held = resolve; });
      const step = tool({
        name: 'step', inputSchema: objectSchema({ n: { type: 'integer' } }),
        run: (args, ctx) => {
          seen.push(ctx);
          if (seen.length === 1) { held(); return new Promise(() => {}); } // waiting when the park comes
          return `ran ${args.n}`;
        },
      });
      const session = await client.openSession({
        model: scripted({ toolCalls: [{ name: 'step', arguments: { n: 1 } }] }, { text: ['ok'] }),
        tools: [step], onDisconnect: 'park',
      });
      const sent = session.send('go').catch((error) => error);
      await within(heldCall, 10_000, 'the tool call to arrive');
      const parked = await session.park();
      assert.deepEqual(parked.pendingRequests.map((p) => [p.name, p.state]), [['step', 'inDoubt']]);
      assert.equal(session.parked, parked);
      assert.equal((await sent).data?.source, 'session/park');
      const result = await session.continueTurn();
      assert.equal(result.message.text, 'ok');
      assert.equal(seen.length, 2);
      assert.equal(seen[1].attempt, 2);
      assert.equal(await session.park(), undefined); // nothing runs now
    } finally {
      await client.close();
    }
  });

  test('a turn parked by session/close is resumed with session.parked and goes on with continueTurn', async () => {
    const client = await spawnReal();
    try {
      const seen = [];
      let held;
      const heldCall = new Promise((resolve) => { held = resolve; });
      const step = tool({
        name: 'step', inputSchema: objectSchema({ n: { type: 'integer' } }),
        run: (args, ctx) => {
          seen.push(ctx);
          if (seen.length === 1) { held(); return new Promise(() => {}); } // still waiting when the session closes
          return `ran ${args.n}`;
        },
      });
      const session = await client.openSession({
        model: scripted({ toolCalls: [{ name: 'step', arguments: { n: 1 } }] }, { text: ['ok'] }),
        tools: [step], onDisconnect: 'park',
      });
      const sent = session.send('go').catch((error) => error);
      await within(heldCall, 10_000, 'the tool call to arrive');
      await client.request('session/close', { sessionId: session.id });
      assert.equal((await sent).data?.source, 'close');
      const resumed = await client.resumeSession(session.id, { tools: [step] });
      assert.deepEqual(resumed.parked.pendingRequests.map((p) => [p.name, p.state]), [['step', 'inDoubt']]);
      const result = await resumed.continueTurn();
      assert.equal(result.message.text, 'ok');
      assert.equal(resumed.parked, undefined);
      assert.equal(seen.length, 2);
      assert.equal(seen[1].inDoubt, true);
      assert.equal(seen[1].attempt, 2);
      assert.equal(seen[1].idempotencyKey, seen[0].idempotencyKey);
      assert.equal(seen[0].idempotencyKey, `${session.id}/${result.turnId}/1/${seen[0].callId}`);
    } finally {
      await client.close();
    }
  });
});

describe('list, resume, delete', () => {
  test('a session is listed, resumed (the same handle, with added tools) and deleted', async () => {
    const client = await spawnReal();
    try {
      const session = await client.openSession({
        model: scripted({ text: ['one'] }, { toolCalls: [{ name: 'add', arguments: { a: 1, b: 2 } }] }, { text: ['three'] }),
        tools: [add.spec], title: 'maths',
      });
      await session.send('first');
      const listed = await client.listSessions();
      const summary = listed.data.find((s) => s.sessionId === session.id);
      assert.ok(summary, 'the session is listed');
      assert.equal(summary.loaded, true);
      assert.equal(summary.entryCount, 2);
      const resumed = await client.resumeSession(session.id, { tools: [add] });
      assert.equal(resumed, session, 'resuming a held session keeps its handle');
      assert.ok(resumed.tools.has('add'), 'the resumed session answers add with its function now');
      assert.equal((await resumed.send('add 1 and 2')).message.text, 'three');
      assert.equal((await resumed.getTranscript()).entries.find((e) => e.type === 'toolOutput').content, 3);
      assert.equal(client.session(session.id), session);
      await session.delete();
      assert.ok(!(await client.listSessions()).data.some((s) => s.sessionId === session.id));
      await assert.rejects(client.resumeSession(session.id), SessionNotFoundError);
    } finally {
      await client.close();
    }
  });

  test('resumeSession passes startMCPServers and mcpServers', async () => {
    const client = await spawnReal();
    try {
      const calc = (name) => ({ name, command: 'python3', args: ['-c', MCP_SERVER] });
      const session = await client.openSession({ model: scripted({ text: ['ok'] }), mcpServers: [calc('stored')] });
      await session.close();
      // Deferred: the session loads without starting its servers.
      const deferred = await client.resumeSession(session.id, { startMCPServers: false });
      assert.deepEqual((await deferred.getState()).mcpServers ?? [], []);
      await deferred.close();
      // A list in place of the stored one, for this load.
      const replaced = await client.resumeSession(session.id, { mcpServers: [calc('given')] });
      assert.deepEqual((await replaced.getState()).mcpServers.map((s) => s.name), ['given']);
      await replaced.close();
      // Not stored: the next load runs the stored server again.
      const again = await client.resumeSession(session.id);
      assert.deepEqual((await again.getState()).mcpServers.map((s) => s.name), ['stored']);
      await again.close();
    } finally {
      await client.close();
    }
  });
});
