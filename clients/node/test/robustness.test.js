// Failure modes: a server dying mid-turn, a throwing tool, stderr noise,
// back-pressure on stdin, a missing binary, the framer.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import {
  BinaryNotFoundError, Client, ConnectionClosedError, InternalError, ServerExitedError,
  PACKAGED_BINARY, ToolExecutorError, findBinary, repoBuildCandidates, scripted, tool,
} from '../src/index.js';
import { LineFramer } from '../src/transport.js';
import { FAKE_SERVER, collect, objectSchema, spawnReal, within } from '../test-support/helpers.js';

const fake = (mode, options = {}) => Client.spawn({ binary: process.execPath, args: [FAKE_SERVER, mode], ...options });

describe('the server dies mid-turn', () => {
  test('every pending call rejects with ServerExitedError naming the exit code and stderr', async () => {
    const client = await fake('die-mid-turn');
    const session = await client.openSession({});
    const stream = session.stream('go');
    const other = client.request('hang');
    const error = await within((async () => {
      try { for await (const event of stream) assert.equal(event.type, 'textDelta'); } catch (e) { return e; }
      return undefined;
    })(), 10000, 'the stream to fail');
    assert.ok(error instanceof ServerExitedError, String(error));
    assert.equal(error.exitCode, 3);
    assert.match(error.message, /exit code 3/);
    assert.match(error.stderrTail, /dying mid-turn/);
    await assert.rejects(other, (e) => e instanceof ServerExitedError && e.exitCode === 3);
    assert.equal(stream.text, 'Hal');
    assert.equal(client.closed, true);
    await assert.rejects(session.send('again'), ServerExitedError, 'a closed client rejects new requests at once');
    await client.close();
  });

  test('a real server killed during a turn rejects the send with ServerExitedError naming the signal', async () => {
    const client = await spawnReal();
    const session = await client.openSession({ model: scripted({ stall: true, text: ['x'] }) });
    const watch = session.events();
    const pending = session.send('go').catch((e) => e);
    await within(watch.next(), 10000, 'the first event');
    process.kill(client.pid, 'SIGKILL');
    const error = await within(pending, 10000, 'the send to fail');
    assert.ok(error instanceof ServerExitedError);
    assert.equal(error.signal, 'SIGKILL');
    assert.match(error.message, /killed by SIGKILL/);
    // Events queued before the kill are still delivered, then the iteration ends.
    await within((async () => { while (!(await watch.next()).done); })(), 5000, 'the event stream to end');
    await client.close();
  });
});

describe('a client-side tool that throws', () => {
  test('ends the turn with ToolExecutorError whose cause is what the tool threw', async () => {
    const client = await spawnReal();
    try {
      const boom = new RangeError('out of range');
      const broken = tool({ name: 'broken', inputSchema: objectSchema({}), run: () => { throw boom; } });
      const session = await client.openSession({ model: scripted({ toolCalls: [{ name: 'broken', arguments: {}, id: 'c1' }] }, { text: ['unused'] }), tools: [broken] });
      const error = await session.send('go').catch((e) => e);
      assert.ok(error instanceof ToolExecutorError, String(error));
      assert.equal(error.code, -32060);
      assert.equal(error.callId, 'c1');
      assert.equal(error.toolName, 'broken');
      assert.equal(error.cause, boom);
      assert.ok(error.clientError instanceof InternalError);
      assert.match(error.clientError.message, /RangeError: out of range/);
      // The session is usable afterwards.
      assert.equal((await session.getState()).isRunning, false);
    } finally {
      await client.close();
    }
  });

  test('a result with no JSON form is an error answer too, not a hang', async () => {
    const client = await spawnReal();
    try {
      const bad = tool({ name: 'bad', inputSchema: objectSchema({}), run: () => ({ big: 10n }) });
      const session = await client.openSession({ model: scripted({ toolCalls: [{ name: 'bad', arguments: {} }] }, { text: ['unused'] }), tools: [bad] });
      const error = await session.send('go').catch((e) => e);
      assert.ok(error instanceof ToolExecutorError);
      assert.ok(error.cause instanceof TypeError);
    } finally {
      await client.close();
    }
  });

  test('ctx.signal aborts when the server withdraws the call', async () => {
    const client = await spawnReal();
    try {
      let resolveStarted;
      const started = new Promise((r) => { resolveStarted = r; });
      const slow = tool({
        name: 'slow', inputSchema: objectSchema({}),
        run: (_, ctx) => new Promise((resolve) => {
          resolveStarted(ctx.signal);
          ctx.signal.addEventListener('abort', () => resolve('stopped'));
        }),
      });
      const session = await client.openSession({ model: scripted({ toolCalls: [{ name: 'slow', arguments: {} }] }), tools: [slow] });
      const controller = new AbortController();
      const pending = session.send('go', { signal: controller.signal }).catch((e) => e);
      const signal = await within(started, 10000, 'the tool to start');
      assert.equal(signal.aborted, false);
      controller.abort();
      await within(new Promise((r) => (signal.aborted ? r() : signal.addEventListener('abort', r))), 10000, 'the server to withdraw the call');
      assert.equal((await within(pending, 10000, 'the send')).kind, 'cancelled');
    } finally {
      await client.close();
    }
  });
});

describe('stderr and stdout stay apart', () => {
  test('stderr lines that look like JSON-RPC never reach the protocol; they are collected or handed over', async () => {
    const lines = [];
    const client = await fake('noisy-stderr', { stderr: (line) => lines.push(line) });
    assert.deepEqual(await client.request('echo', { x: 1 }), { bytes: 7 });
    await client.close();
    assert.ok(lines.some((l) => l.includes('from stderr, not the protocol')));
    assert.match(client.stderrTail, /log: got echo/);
  });

  test('the stderr tail is bounded', async () => {
    const client = await fake('noisy-stderr', { stderrTailLines: 2 });
    for (let i = 0; i < 5; i += 1) await client.request('echo', { i });
    await client.close();
    assert.ok(client.stderrTail.trim().split('\n').length <= 2);
  });
});

describe('back-pressure on stdin', () => {
  test('writes wait for drain when the server does not read, and all arrive in order', async () => {
    const client = await fake('slow-reader', { initialize: false });
    try {
      const ready = new Promise((r) => client.onNotification('fake/ready', r));
      await within(ready, 10000, 'the fake server to be ready');
      const payload = 'x'.repeat(1 << 20);
      const answers = [1, 2, 3].map((n) => client.request('echo', { n, payload }));
      let settled = false;
      Promise.allSettled(answers).then(() => { settled = true; });
      await new Promise(setImmediate);
      assert.ok(client.drainWaits >= 1, 'the first megabyte filled the pipe');
      assert.equal(settled, false, 'nothing is answered while the server does not read');
      process.kill(client.pid, 'SIGUSR2');
      const sizes = await within(Promise.all(answers), 10000, 'the answers');
      assert.deepEqual(sizes.map((a) => a.bytes), [1, 2, 3].map((n) => JSON.stringify({ n, payload }).length));
    } finally {
      await client.close();
    }
  });
});

describe('binary discovery', () => {
  test('an explicit binary that does not exist is BinaryNotFoundError naming it', () => {
    assert.throws(() => findBinary('/no/such/agentrpc'), (e) => e instanceof BinaryNotFoundError && /binary option: \/no\/such\/agentrpc/.test(e.message));
  });

  test('nothing found lists every place looked at', () => {
    const error = (() => { try { findBinary(undefined, { env: { PATH: '/nonexistent' }, start: '/' }); } catch (e) { return e; } return undefined; })();
    assert.ok(error instanceof BinaryNotFoundError);
    assert.deepEqual(error.searched, [
      '$AGENTRPC_BIN: not set', `${PACKAGED_BINARY} (the npm package's binary)`, '"agentrpc" on PATH',
      '/.build/debug/agentrpc', '/.build/release/agentrpc',
    ]);
    assert.match(error.message, /looked in:\n {2}- \$AGENTRPC_BIN: not set/);
    assert.match(error.message, /set AGENTRPC_BIN/);
  });

  test('$AGENTRPC_BIN wins over the repository build; the repository build is found from the package', () => {
    assert.equal(findBinary(undefined, { env: { AGENTRPC_BIN: process.execPath } }), process.execPath);
    assert.throws(() => findBinary(undefined, { env: { AGENTRPC_BIN: '/missing/agentrpc' } }), /\$AGENTRPC_BIN: \/missing\/agentrpc/);
    const candidates = repoBuildCandidates();
    assert.ok(candidates.some((c) => c.endsWith(join('.build', 'debug', 'agentrpc'))));
  });

  test("the npm package's binary comes after $AGENTRPC_BIN and before PATH and the repository build", () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentrpc-discovery-'));
    try {
      const executable = (path) => { mkdirSync(dirname(path), { recursive: true }); writeFileSync(path, '#!/bin/sh\n', { mode: 0o755 }); return path; };
      const packaged = executable(join(dir, 'package', 'bin', 'agentrpc'));
      const onPath = executable(join(dir, 'path', 'agentrpc'));
      const fromEnv = executable(join(dir, 'env', 'agentrpc'));
      const repo = executable(join(dir, 'repo', '.build', 'debug', 'agentrpc'));
      const start = join(dir, 'repo', 'clients', 'node', 'src');
      const PATH = dirname(onPath);
      assert.equal(findBinary(undefined, { env: { AGENTRPC_BIN: fromEnv, PATH }, packaged, start }), fromEnv);
      assert.equal(findBinary(undefined, { env: { PATH }, packaged, start }), packaged);
      // Without it (a checkout), the search goes on as before: PATH, then the repository build.
      const missing = join(dir, 'none', 'bin', 'agentrpc');
      assert.equal(findBinary(undefined, { env: { PATH }, packaged: missing, start }), onPath);
      assert.equal(findBinary(undefined, { env: { PATH: join(dir, 'none') }, packaged: missing, start }), repo);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('Client.spawn rejects with BinaryNotFoundError', async () => {
    await assert.rejects(Client.spawn({ binary: '/no/such/agentrpc' }), BinaryNotFoundError);
  });
});

describe('LineFramer', () => {
  test('frames split across chunks and many in one chunk', () => {
    const framer = new LineFramer(1024);
    assert.deepEqual(framer.push(Buffer.from('{"a":')), []);
    const lines = framer.push(Buffer.from('1}\n{"b":2}\n{"c"'));
    assert.deepEqual(lines.map(String), ['{"a":1}', '{"b":2}']);
    assert.deepEqual(framer.push(Buffer.from(':3}\n')).map(String), ['{"c":3}']);
  });

  test('a frame over the limit is an error, not unbounded memory', () => {
    const framer = new LineFramer(8);
    assert.throws(() => framer.push(Buffer.from('0123456789')), ConnectionClosedError);
  });
});
