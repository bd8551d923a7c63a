// The recorded transcripts of Tests/Transcripts, replayed through the Node
// client against the real binary: each `send` goes through client.request /
// client.notify, each `reply` answers through a client.onRequest handler, and
// each expected message is matched against what the client delivered — the
// answer a request resolved or rejected with (rejections must be the error
// class of their kind), the notifications, the server's requests. Ids are the
// client's own, mapped from the transcript's.
//
// A transcript fits when it speaks through a client's API: not raw bytes, not
// batches or several messages in one write, not content-length framing, not a
// reused request id, not closing stdin under the server. The others pin the server's handling of malformed input and
// are replayed by `agentrpc replay` (Swift tests) only; the list of what was
// left out, and why, is printed as a test diagnostic.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { AgentRPCError, Client, errorClassFor, errorFromWire } from '../src/index.js';
import { METHODS } from '../src/generated/protocol.js';
import { BINARY, REPO } from '../test-support/helpers.js';

const ROOT = join(REPO, 'Tests', 'Transcripts');
// The step kinds a client can take part in; any other (raw bytes, batches,
// several messages in one write, closing stdin) makes the transcript a misfit.
const CLIENT_STEPS = ['send', 'reply', 'expect', 'expectUnordered', 'expectExit', 'expectStderr', 'expectFile', 'signal', 'comment'];

function transcriptFiles(dir) {
  return readdirSync(dir).sort().flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return transcriptFiles(path);
    return name.endsWith('.jsonl') ? [path] : [];
  });
}

function load(path) {
  const steps = [];
  readFileSync(path, 'utf8').split('\n').forEach((text, index) => {
    if (text.trim()) steps.push({ line: index + 1, ...JSON.parse(text) });
  });
  const header = steps[0]?.transcript ? steps.shift().transcript : {};
  return { header, steps };
}

const isId = (v) => typeof v === 'number' || typeof v === 'string';

/** Why a transcript does not fit the client's API, or null when it does. */
function misfit({ header, steps }) {
  if (header.framing === 'content-length') return 'content-length framing';
  if (header.command && header.command !== 'serve') return `the ${header.command} front end (another protocol)`;
  const sentIds = new Set();
  for (const step of steps) {
    const kind = Object.keys(step).find((k) => k !== 'line' && k !== 'timeoutSeconds' && !CLIENT_STEPS.includes(k));
    if (kind) return `a ${kind} step`;
    const message = step.send ?? step.reply;
    if (message !== undefined) {
      if (typeof message !== 'object' || Array.isArray(message) || message === null) return 'a batch or non-object send';
      if (message.jsonrpc !== '2.0' || Object.keys(message).some((k) => !['jsonrpc', 'id', 'method', 'params', 'result', 'error'].includes(k))) {
        return 'a send that is not a well-formed JSON-RPC message';
      }
      if (step.send && typeof message.method !== 'string') return 'a send without a method';
      if (step.send && 'id' in message) {
        if (!isId(message.id)) return 'a send with an id that is not a number or string';
        if (sentIds.has(message.id)) return 'a reused request id';
        sentIds.add(message.id);
      }
    }
    for (const pattern of step.expect ? [step.expect] : step.expectUnordered ?? []) {
      if (Array.isArray(pattern)) return 'an expected batch';
      const response = !('method' in pattern);
      if (response && !(isId(pattern.id) && sentIds.has(pattern.id))) return 'an answer to something the client did not send';
    }
  }
  return null;
}

// -- patterns (docs/transcripts.md) ------------------------------------------------

const PLACEHOLDER = /^\$[A-Za-z]/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** The first difference between `pattern` and `actual` (a string), or null; captures go into `captures`. */
function mismatch(pattern, actual, captures, path = '$') {
  if (typeof pattern === 'string' && PLACEHOLDER.test(pattern)) {
    const [name, ...rest] = pattern.slice(1).split(':');
    const arg = rest.join(':');
    const fail = (what) => `at ${path}: expected ${what}, got ${JSON.stringify(actual)}`;
    switch (name) {
      case 'any': return actual === undefined ? fail('a value') : null;
      case 'string': return typeof actual === 'string' ? null : fail('a string');
      case 'number': return typeof actual === 'number' ? null : fail('a number');
      case 'integer': return Number.isInteger(actual) ? null : fail('an integer');
      case 'bool': return typeof actual === 'boolean' ? null : fail('a boolean');
      case 'object': return actual && typeof actual === 'object' && !Array.isArray(actual) ? null : fail('an object');
      case 'array': return Array.isArray(actual) ? null : fail('an array');
      case 'timestamp': return typeof actual === 'string' && TIMESTAMP.test(actual) ? null : fail('a timestamp');
      case 'regex': return typeof actual === 'string' && new RegExp(`^(?:${arg})$`).test(actual) ? null : fail(`/${arg}/`);
      case 'capture': if (actual === undefined) return fail('a value'); captures.set(arg, actual); return null;
      case 'ref': return deepEqual(captures.get(arg), actual) ? null : fail(JSON.stringify(captures.get(arg)));
      case 'absent': return actual === undefined ? null : fail('no member');
      default: throw new Error(`unknown placeholder ${pattern}`);
    }
  }
  if (typeof pattern === 'string' && pattern.startsWith('$$')) pattern = pattern.slice(1);
  if (Array.isArray(pattern)) {
    if (!Array.isArray(actual) || actual.length !== pattern.length) return `at ${path}: expected ${pattern.length} elements, got ${JSON.stringify(actual)}`;
    for (let i = 0; i < pattern.length; i += 1) {
      const m = mismatch(pattern[i], actual[i], captures, `${path}[${i}]`);
      if (m) return m;
    }
    return null;
  }
  if (pattern && typeof pattern === 'object') {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return `at ${path}: expected an object, got ${JSON.stringify(actual)}`;
    const { $partial: partial, ...members } = pattern;
    for (const key of Object.keys(members).sort()) {
      const m = mismatch(members[key], actual[key], captures, `${path}.${key}`);
      if (m) return m;
    }
    if (!partial) {
      const extra = Object.keys(actual).filter((k) => !(k in members) && actual[k] !== undefined);
      if (extra.length) return `at ${path}: unexpected members ${extra.join(', ')}`;
    }
    return null;
  }
  return deepEqual(pattern, actual) ? null : `at ${path}: expected ${JSON.stringify(pattern)}, got ${JSON.stringify(actual)}`;
}

function deepEqual(a, b) {
  try { assert.deepStrictEqual(a, b); return true; } catch { return false; }
}

/** `$ref:NAME` filled in wherever it is a whole string value; `$$` unescaped. */
function fill(value, captures) {
  if (typeof value === 'string') {
    if (value.startsWith('$ref:')) {
      const name = value.slice(5);
      if (!captures.has(name)) throw new Error(`$ref:${name} was never captured`);
      return captures.get(name);
    }
    return value.startsWith('$$') ? value.slice(1) : value;
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, captures));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, captures)]));
  return value;
}

// -- the replay -----------------------------------------------------------------------

// Every request and notification the server sends, from the schema: the replayer answers a
// new server request as soon as the schema has it.
const fromServer = (kind) => METHODS.filter((m) => m.direction === 'serverToClient' && m.kind === kind).map((m) => m.method);
const SERVER_REQUESTS = fromServer('request');
// `$/cancelRequest` goes both ways; the schema lists it once, as the client's.
const SERVER_NOTIFICATIONS = [...fromServer('notification'), '$/cancelRequest'];

async function replay(path, { header, steps }) {
  const dir = mkdtempSync(join(tmpdir(), 'agentrpc-node-replay-'));
  // As `agentrpc replay` does: $tmpdir a fresh directory, $transcriptdir the transcript's own.
  const expand = (v) => (typeof v === 'string' ? v.replaceAll('$tmpdir', dir).replaceAll('$transcriptdir', dirname(resolve(path))) : v);
  const client = await Client.spawn({
    binary: BINARY, initialize: false, args: ['serve', ...(header.args ?? []).map(expand)],
    // A store of its own per transcript, as `agentrpc replay` gives each one.
    env: { XDG_STATE_HOME: dir, ...Object.fromEntries(Object.entries(header.env ?? {}).map(([k, v]) => [k, expand(v)])) },
  });
  const captures = new Map();
  const answers = new Map(); // transcript id → {settled: Promise<{result}|{error}>, controller}
  const inbox = []; // {message, used}
  const pendingServerRequests = new Map(); // wire id → {resolve, reject}
  let arrived = () => {};
  let arrival = new Promise((r) => { arrived = r; });
  const deliver = (message) => {
    inbox.push({ message, used: false });
    arrived();
    arrival = new Promise((r) => { arrived = r; });
  };
  for (const method of SERVER_NOTIFICATIONS) {
    client.onNotification(method, (params) => deliver({ jsonrpc: '2.0', method, params }));
  }
  for (const method of SERVER_REQUESTS) {
    client.onRequest(method, (params, { id }) => new Promise((resolve, reject) => {
      pendingServerRequests.set(id, { resolve, reject });
      deliver({ jsonrpc: '2.0', id, method, params });
    }));
  }
  const where = (step) => `${relative(REPO, path)}:${step.line}`;
  const timeoutOf = (step) => 1000 * (step.timeoutSeconds ?? header.timeoutSeconds ?? 5);

  /** The earliest unused message from the server that matches `pattern`, waiting for it (bounded). */
  async function take(pattern, step) {
    const deadline = Date.now() + timeoutOf(step);
    let lastMiss = 'nothing arrived';
    for (;;) {
      for (const item of inbox) {
        if (item.used) continue;
        const trial = new Map(captures);
        const miss = mismatch(pattern, item.message, trial);
        if (!miss) {
          item.used = true;
          for (const [k, v] of trial) captures.set(k, v);
          return;
        }
        if (item.message.method === pattern.method) lastMiss = `${miss}\n  actual: ${JSON.stringify(item.message)}`;
      }
      const left = deadline - Date.now();
      if (left <= 0) assert.fail(`${where(step)}: no message matched ${JSON.stringify(pattern)}\n  closest: ${lastMiss}\n  stderr: ${client.stderrTail.slice(-500)}`);
      let timer;
      await Promise.race([arrival, new Promise((r) => { timer = setTimeout(r, left); })]);
      clearTimeout(timer);
    }
  }

  async function expectOne(pattern, step) {
    if ('method' in pattern) return take(pattern, step);
    const answer = answers.get(pattern.id);
    let timer;
    const outcome = await Promise.race([answer.settled, new Promise((r) => { timer = setTimeout(() => r({ timeout: true }), timeoutOf(step)); })]);
    clearTimeout(timer);
    assert.ok(!outcome.timeout, `${where(step)}: no answer to request ${pattern.id}`);
    let actual;
    if ('error' in outcome) {
      const error = outcome.error;
      assert.ok(error instanceof AgentRPCError, `${where(step)}: request ${pattern.id} failed on the client side: ${error}`);
      assert.equal(error.constructor, errorClassFor(error.code, error.kind), `${where(step)}: ${error.kind} decoded to its class`);
      actual = { jsonrpc: '2.0', id: pattern.id, error: { code: error.code, message: error.message, data: error.data } };
    } else {
      actual = { jsonrpc: '2.0', id: pattern.id, result: outcome.result };
    }
    const trial = new Map(captures);
    const miss = mismatch(pattern, actual, trial);
    assert.equal(miss, null, `${where(step)}: ${miss}\n  expected: ${JSON.stringify(pattern)}\n  actual: ${JSON.stringify(actual)}`);
    for (const [k, v] of trial) captures.set(k, v);
    return undefined;
  }

  // Lines of files the server writes (--dump-requests, --trace-file) consumed so far, by path.
  const consumedLines = new Map();
  async function expectFile(step) {
    const { path: filePath, lines: patterns, atLeast } = step.expectFile;
    const file = expand(filePath).startsWith('/') ? expand(filePath) : join(REPO, expand(filePath));
    const used = consumedLines.get(file) ?? 0;
    const deadline = Date.now() + timeoutOf(step);
    let complete = [];
    for (;;) {
      let text = '';
      try { text = readFileSync(file, 'utf8'); } catch { /* not written yet */ }
      // A last line without its newline is still being written.
      complete = text.split('\n').slice(0, -1).filter((l) => l.trim()).slice(used);
      if (complete.length >= patterns.length || Date.now() >= deadline) break;
      await Promise.race([arrival, client.waitClosed(50)]);
    }
    assert.ok(complete.length >= patterns.length, `${where(step)}: ${filePath} has ${complete.length} new lines, expected ${patterns.length}`);
    if (!atLeast) assert.equal(complete.length, patterns.length, `${where(step)}: ${filePath} has more lines than expected:\n${complete.slice(patterns.length).join('\n')}`);
    patterns.forEach((pattern, i) => {
      const trial = new Map(captures);
      const miss = mismatch(pattern, JSON.parse(complete[i]), trial);
      assert.equal(miss, null, `${where(step)}: ${filePath} line ${used + i + 1}: ${miss}`);
      for (const [k, v] of trial) captures.set(k, v);
    });
    consumedLines.set(file, used + patterns.length);
  }

  try {
    for (const step of steps) {
      if (step.send) {
        const message = fill(step.send, captures);
        if (message.method === '$/cancelRequest' && answers.has(message.params?.id) && !answers.get(message.params.id).aborted) {
          // Withdrawing one of ours: the client sends $/cancelRequest with its own id.
          const answer = answers.get(message.params.id);
          answer.aborted = true;
          answer.controller.abort();
        } else if ('id' in message) {
          const controller = new AbortController();
          const settled = client.request(message.method, message.params, { signal: controller.signal })
            .then((result) => ({ result }), (error) => ({ error }));
          answers.set(message.id, { settled, controller, aborted: false });
        } else {
          await client.notify(message.method, message.params);
        }
      } else if (step.reply) {
        const message = fill(step.reply, captures);
        const pending = pendingServerRequests.get(message.id);
        assert.ok(pending, `${where(step)}: reply to ${JSON.stringify(message.id)}, which the server did not ask`);
        pendingServerRequests.delete(message.id);
        if ('error' in message) pending.reject(errorFromWire(message.error));
        else pending.resolve(message.result);
      } else if (step.expect) {
        await expectOne(step.expect, step);
      } else if (step.expectUnordered) {
        for (const pattern of step.expectUnordered) await expectOne(pattern, step);
      } else if (step.expectExit) {
        const within = 1000 * (step.expectExit.withinSeconds ?? 2);
        assert.ok(await client.waitClosed(within), `${where(step)}: the server did not exit within ${within} ms`);
        assert.equal(client.exitCode, step.expectExit.code ?? 0, `${where(step)}: exit code`);
      } else if (step.expectStderr) {
        const re = new RegExp(step.expectStderr);
        const deadline = Date.now() + timeoutOf(step);
        while (!re.test(client.stderrTail)) {
          assert.ok(Date.now() < deadline, `${where(step)}: stderr never matched /${step.expectStderr}/`);
          await Promise.race([arrival, client.waitClosed(50)]);
        }
      } else if (step.signal) {
        // The user (or a supervisor) signals the server; the client sees what follows.
        process.kill(client.pid, `SIG${step.signal}`);
      } else if (step.expectFile) {
        await expectFile(step);
      } else if (!step.comment) {
        throw new Error(`${where(step)}: unknown step ${JSON.stringify(step)}`);
      }
    }
    const left = inbox.filter((i) => !i.used).map((i) => JSON.stringify(i.message));
    assert.deepEqual(left, [], `${relative(REPO, path)}: messages no step consumed`);
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('Tests/Transcripts replayed through the Node client', () => {
  const skipped = [];
  for (const path of transcriptFiles(ROOT)) {
    const transcript = load(path);
    const reason = misfit(transcript);
    if (reason) { skipped.push(`${relative(ROOT, path)}: ${reason}`); continue; }
    test(relative(ROOT, path), () => replay(path, transcript));
  }
  test('transcripts left to `agentrpc replay`', (t) => {
    t.diagnostic(`${skipped.length} transcripts do not fit a client's API and are replayed by the Swift tests only:\n${skipped.join('\n')}`);
    assert.ok(skipped.length < transcriptFiles(ROOT).length / 2, 'most transcripts replay through the client');
  });
});
