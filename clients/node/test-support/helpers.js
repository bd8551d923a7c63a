// Shared by the tests: the real binary (AGENTRPC_BIN, or the repository's
// .build/debug build), and bounded waits — no test waits without a limit.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '../src/index.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
// Not under test/: `node --test DIR` would run every .js file there as a test.
export const BINARY = process.env.AGENTRPC_BIN || join(REPO, '.build', 'debug', 'agentrpc');
if (!existsSync(BINARY)) {
  throw new Error(`the agentrpc binary is missing at ${BINARY}: run \`swift build\` or set AGENTRPC_BIN`);
}
// Servers keep sessions in $XDG_STATE_HOME/agentrpc/sessions by default: each test
// process gets its own, so no test sees (or leaves) another's stored sessions.
process.env.XDG_STATE_HOME = mkdtempSync(join(tmpdir(), 'agentrpc-node-state-'));
process.on('exit', () => rmSync(process.env.XDG_STATE_HOME, { recursive: true, force: true }));

/** The misbehaving stand-in server (test-support/fake-server.js). */
export const FAKE_SERVER = join(dirname(fileURLToPath(import.meta.url)), 'fake-server.js');

/** A client on the real binary; the caller closes it (or uses `using`). */
export function spawnReal(options = {}) {
  return Client.spawn({ binary: BINARY, ...options });
}

/** A few lines of Python: an MCP server on stdio with one tool, `add` (run as `python3 -c MCP_SERVER`). */
export const MCP_SERVER = [
  'import json, sys',
  'for line in sys.stdin:',
  '    m = json.loads(line)',
  '    if "id" not in m: continue',
  '    r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1"}} if m["method"] == "initialize" else {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}',
  '    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)',
].join('\n');

/** Rejects with a message naming `what` if `promise` does not settle within `ms`. */
export function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Collects the events of a stream until it ends, bounded. */
export async function collect(iterable, ms = 10000, what = 'the stream to end') {
  const events = [];
  await within((async () => { for await (const e of iterable) events.push(e); })(), ms, what);
  return events;
}

/** The first event of `iterator` satisfying `predicate`, bounded. */
export async function nextMatching(iterator, predicate, ms = 10000, what = 'an event') {
  return within((async () => {
    for (;;) {
      const { value, done } = await iterator.next();
      if (done) throw new Error(`the events ended before ${what}`);
      if (predicate(value)) return value;
    }
  })(), ms, what);
}

export const objectSchema = (properties, required = Object.keys(properties)) => ({ type: 'object', properties, required });
