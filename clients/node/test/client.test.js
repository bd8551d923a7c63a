// Client: the handshake, the lower-level request API, server requests, the end.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  Client, ConnectionClosedError, DEFAULT_CAPABILITIES, PROTOCOL_VERSION, RequestTimeoutError, VERSION, decisionOf, scripted,
} from '../src/index.js';
import { BINARY, FAKE_SERVER, spawnReal, within } from '../test-support/helpers.js';

describe('Client', () => {
  test('spawn runs the handshake and exposes what the server said', async () => {
    const client = await spawnReal();
    try {
      assert.equal(client.initialized, true);
      assert.equal(client.protocolVersion, PROTOCOL_VERSION);
      assert.equal(client.serverInfo.name, 'agentrpc');
      assert.equal(client.serverCapabilities.transcriptMutation, true);
      assert.equal(typeof client.pid, 'number');
      assert.equal(client.closed, false);
    } finally {
      await client.close();
    }
    assert.equal(client.closed, true);
    assert.equal(client.exitCode, 0, 'shutdown then exit is a clean exit');
  });

  test('close() is idempotent and later requests reject with ConnectionClosedError', async () => {
    const client = await spawnReal();
    await Promise.all([client.close(), client.close()]);
    await client.close();
    await assert.rejects(client.request('session/list', {}), ConnectionClosedError);
    await assert.rejects(client.notify('exit'), ConnectionClosedError);
    assert.equal(await client.waitClosed(1000), true);
  });

  test('Symbol.asyncDispose closes the client (what `await using` calls)', async () => {
    const client = await spawnReal();
    const session = await client.openSession({ model: scripted({ text: ['x'] }) });
    await session[Symbol.asyncDispose]();
    await assert.rejects(session.getState(), /not found|sessionNotFound/i);
    await client[Symbol.asyncDispose]();
    assert.equal(client.closed, true);
    await session[Symbol.asyncDispose](); // a session of a closed client is already gone: no throw
  });

  test('`await using` closes at scope exit where the runtime parses it', async (t) => {
    // Node 20 has Symbol.asyncDispose but not the `await using` syntax (V8 ships it in Node 24).
    let supported = true;
    try { new Function('async () => { await using x = null; }'); } catch { supported = false; }
    if (!supported) { t.diagnostic(`node ${process.version} cannot parse \`await using\`; the test above calls Symbol.asyncDispose directly`); return; }
    const run = new Function('spawn', 'return (async () => { let c; { await using client = await spawn(); c = client; } return c; })();');
    const client = await run(() => spawnReal());
    assert.equal(client.closed, true);
  });

  test('initialize: false leaves the handshake to the caller; clientInfo and capabilities go on the wire', async () => {
    const client = await Client.spawn({ binary: BINARY, initialize: false });
    try {
      assert.equal(client.initialized, false);
      const result = await client.initialize({ clientInfo: { name: 'mine', version: '9' }, capabilities: { ...DEFAULT_CAPABILITIES } });
      assert.equal(result.protocolVersion, 1);
      assert.equal(client.initialized, true);
    } finally {
      await client.close();
    }
  });

  test('request() with a timeout rejects with RequestTimeoutError and withdraws the request', async () => {
    const client = await Client.spawn({ binary: process.execPath, args: [FAKE_SERVER, ''] });
    try {
      const error = await client.request('hang', {}, { timeout: 50 }).catch((e) => e);
      assert.ok(error instanceof RequestTimeoutError);
      assert.equal(error.method, 'hang');
      assert.deepEqual(await client.request('echo', { a: 1 }), { bytes: 7 }, 'the connection is still fine');
    } finally {
      await client.close();
    }
  });

  test('onNotification sees raw session/event params; unsubscribing stops it; a throwing listener harms nothing', async () => {
    const client = await spawnReal();
    try {
      const seen = [];
      const off = client.onNotification('session/event', (params) => seen.push(params.event.type));
      client.onNotification('session/event', () => { throw new Error('faulty listener'); });
      const session = await client.openSession({ model: scripted({ text: ['a'] }, { text: ['b'] }) });
      await session.send('one');
      assert.equal(seen.at(-1), 'turnEnded');
      const count = seen.length;
      off();
      await session.send('two');
      assert.equal(seen.length, count);
    } finally {
      await client.close();
    }
  });

  test('onRequest answers server requests: context/refresh values reach the instructions', async () => {
    const client = await spawnReal({ capabilities: { ...DEFAULT_CAPABILITIES, contextSources: true } });
    try {
      const asked = [];
      client.onRequest('context/refresh', (params) => {
        asked.push(params.sources);
        return { values: { branch: 'feature/x' } };
      });
      const session = await client.openSession({ model: scripted({ text: ['ok'] }), contextSources: [{ name: 'branch' }], instructions: 'Help.' });
      await session.send('hi');
      assert.deepEqual(asked, [['branch']]);
      assert.match((await session.getTranscript()).instructions, /feature\/x/);
    } finally {
      await client.close();
    }
  });

  test('with confirmations: "request" the onConfirm handler answers confirmation/request', async () => {
    const calls = [];
    const client = await spawnReal({
      capabilities: { ...DEFAULT_CAPABILITIES, confirmations: 'request' },
      onConfirm: async (call) => { calls.push(call.name); return { approve: false, reason: 'no' }; },
    });
    try {
      const session = await client.openSession({
        model: scripted({ toolCalls: [{ name: 'deploy', arguments: {} }] }, { text: ['fine'] }),
        tools: [{ name: 'deploy', confirmation: 'always' }],
      });
      const events = [];
      for await (const e of session.stream('go')) events.push(e);
      assert.deepEqual(calls, ['deploy']);
      assert.ok(!events.some((e) => e.type === 'confirmationRequested'), 'the request flow has no confirmationRequested event');
      const resolved = events.find((e) => e.type === 'confirmationResolved');
      assert.equal(resolved.decision, 'deny');
    } finally {
      await client.close();
    }
  });

  test('a throwing onConfirm denies the call and says why', async () => {
    const client = await spawnReal({ onConfirm: () => { throw new Error('ui crashed'); } });
    try {
      const session = await client.openSession({
        model: scripted({ toolCalls: [{ name: 'rm', arguments: {} }] }, { text: ['ok'] }), tools: [{ name: 'rm', confirmation: 'always' }],
      });
      await within(session.send('go'), 10000, 'the turn');
      const output = (await session.getTranscript()).entries.find((e) => e.type === 'toolOutput');
      assert.equal(output.outcome, 'denied');
      assert.match(output.content, /ui crashed/);
    } finally {
      await client.close();
    }
  });

  test('decisionOf maps the answers an onConfirm may give', () => {
    assert.deepEqual(decisionOf(true), { decision: 'approve' });
    assert.deepEqual(decisionOf(false), { decision: 'deny' });
    assert.deepEqual(decisionOf('deny'), { decision: 'deny' });
    assert.deepEqual(decisionOf({ decision: 'deny', reason: 'r' }), { decision: 'deny', reason: 'r' });
    assert.deepEqual(decisionOf({ approve: true }), { decision: 'approve' });
    assert.throws(() => decisionOf(42), TypeError);
  });

  test('VERSION is what the handshake sends by default', () => {
    assert.match(VERSION, /^\d+\.\d+\.\d+$/);
  });
});
