// Human in the loop through the Node client: steering a running turn, queued
// sends, richer confirmation decisions, standing approval rules, ask_user and
// rewind with undo (docs/protocol.md §17).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  AlreadyRunningError, CancelledError, NoRunningTurnError, scripted, tool,
} from '../src/index.js';
import { collect, nextMatching, objectSchema, spawnReal, within } from '../test-support/helpers.js';

/** A promise with its resolve function, to hold a tool until the test lets it go. */
function latch() {
  let release;
  const promise = new Promise((r) => { release = r; });
  return { promise, release };
}

describe('human in the loop', () => {
  let client;
  before(async () => { client = await spawnReal({ onAsk: async (q) => (q.options ? q.options.at(-1) : 'no idea') }); });
  after(async () => { await client.close(); });

  test('steer() reaches the running turn at its next checkpoint; with no turn it is NoRunningTurnError', async () => {
    const gate = latch();
    const started = latch();
    const read = tool({ name: 'read', inputSchema: objectSchema({ path: { type: 'string' } }), run: async () => { started.release(); await gate.promise; return 'hi'; } });
    const session = await client.openSession({
      model: scripted({ toolCalls: [{ name: 'read', arguments: { path: 'a.txt' } }] }, { text: ['a says hi; b next.'] }), tools: [read],
    });
    const stream = session.stream('Read a.txt');
    const events = [];
    const consume = (async () => { for await (const e of stream) events.push(e); })();
    await within(started.promise, 10000, 'the tool to start');
    const steered = await session.steer('Then read b.txt too', { expectedTurnId: stream.turnId });
    assert.equal(steered.turnId, stream.turnId);
    gate.release();
    await within(consume, 10000, 'the turn');
    const applied = events.find((e) => e.type === 'steeringApplied');
    assert.equal(applied.input.text, 'Then read b.txt too');
    const prompts = (await session.getTranscript()).entries.filter((e) => e.type === 'prompt').map((e) => e.text);
    assert.deepEqual(prompts, ['Read a.txt', 'Then read b.txt too']);
    await assert.rejects(session.steer('too late'), NoRunningTurnError);
  });

  test('send({queue: true}) waits for the running turn instead of AlreadyRunningError', async () => {
    const session = await client.openSession({ model: scripted({ stall: true, text: ['one'] }, { text: ['two'] }) });
    const watch = session.events();
    const controller = new AbortController();
    const first = session.send('first', { signal: controller.signal }).catch((e) => e);
    await nextMatching(watch, (e) => e.type === 'textDelta', 10000, 'the first turn to stream');
    await assert.rejects(session.send('plain'), AlreadyRunningError);
    const queued = session.send('second', { queue: true });
    assert.equal((await session.getState()).queuedSends, 1);
    controller.abort();
    assert.ok((await within(first, 10000, 'the first turn')) instanceof CancelledError);
    assert.equal((await within(queued, 10000, 'the queued turn')).message.text, 'two');
    await watch.return();
  });

  test('onAsk answers the ask_user tool; the answer is the call output', async () => {
    const session = await client.openSession({
      askUser: true,
      model: scripted({ toolCalls: [{ name: 'ask_user', arguments: { question: 'Which colour?', options: ['red', 'blue'] } }] }, { text: ['Blue it is.'] }),
    });
    const asked = [];
    session.onAsk = (q) => { asked.push(q.question); return { answer: 'blue' }; };
    const events = await collect(session.stream('Paint it'));
    assert.deepEqual(asked, ['Which colour?']);
    const finished = events.find((e) => e.type === 'toolCallFinished');
    assert.equal(finished.name, 'ask_user');
    assert.match(JSON.stringify(finished.content), /blue/);
  });

  test('onElicitation fills in an MCP server\'s form (user/elicit); its values go back to the server', async () => {
    // A server of the handshake era (it refuses the 2026-07-28 probe) whose tool asks
    // for a form (elicitation/create) and answers with what came back.
    const server = [
      'import json, sys',
      'def send(m): print(json.dumps(m), flush=True)',
      'call = None',
      'for line in sys.stdin:',
      '    m = json.loads(line)',
      '    method = m.get("method")',
      '    if method == "initialize": send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "form", "version": "1"}}})',
      '    elif method == "tools/list": send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "book", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}})',
      '    elif method == "tools/call":',
      '        call = m["id"]',
      '        send({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": {"mode": "form", "message": "Which date?", "requestedSchema": {"type": "object", "properties": {"date": {"type": "string"}}}}})',
      '    elif m.get("id") == "ask-1": send({"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text", "text": json.dumps(m["result"])}]}})',
      '    elif "id" in m and method: send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}})',
    ].join('\n');
    const asked = [];
    const forms = await spawnReal({
      onElicitation: (e) => { asked.push(e); return { date: '2026-12-24' }; },
    });
    try {
      const session = await forms.openSession({
        mcpServers: [{ name: 'form', command: 'python3', args: ['-c', server] }],
        model: scripted({ toolCalls: [{ name: 'mcp__form__book', arguments: {} }] }, { text: ['Booked.'] }),
      });
      const events = await collect(session.stream('Book it'));
      const finished = events.find((e) => e.type === 'toolCallFinished');
      assert.deepEqual(JSON.parse(finished.content), { action: 'accept', content: { date: '2026-12-24' } });
      assert.equal(asked.length, 1);
      assert.equal(asked[0].server, 'form');
      assert.equal(asked[0].message, 'Which date?');
      assert.equal(asked[0].callId, finished.callId);
      assert.deepEqual(asked[0].requestedSchema, { type: 'object', properties: { date: { type: 'string' } } });
    } finally {
      await forms.close();
    }
  });

  test('rewind({turnId, undo: true}) removes the turn and runs its undo functions, newest first', async () => {
    const undone = [];
    const write = tool({ name: 'write', inputSchema: objectSchema({ f: { type: 'string' } }), run: ({ f }) => ({ content: `wrote ${f}`, undo: () => { undone.push(f); } }) });
    const session = await client.openSession({
      model: scripted(
        { toolCalls: [{ name: 'write', arguments: { f: 'a' } }] }, { text: ['Wrote a.'] },
        { toolCalls: [{ name: 'write', arguments: { f: 'b' } }, { name: 'write', arguments: { f: 'c' } }] }, { text: ['Wrote b and c.'] },
      ),
      tools: [write],
    });
    await session.send('Write a');
    const second = await session.send('Write b and c');
    // `undo` is the caller's decision every time, as on the wire: no default.
    await assert.rejects(session.rewind({ turnId: second.turnId }), TypeError);
    assert.deepEqual(undone, []);
    const result = await session.rewind({ turnId: second.turnId, undo: true });
    assert.deepEqual(undone, ['c', 'b']);
    assert.equal(result.entryCount, (await session.getTranscript()).entries.length);
    assert.ok(result.removedEntries.length > 0);
  });

  test('approveForSession adds a standing rule; setApprovalRules adds and removes rules', async () => {
    const calls = [];
    const notify = tool({ name: 'notify', inputSchema: objectSchema({ to: { type: 'string' } }), confirmation: 'always', run: ({ to }) => { calls.push(to); return 'sent'; } });
    let asked = 0;
    const session = await client.openSession({
      model: scripted({ toolCalls: [{ name: 'notify', arguments: { to: 'team' } }] }, { toolCalls: [{ name: 'notify', arguments: { to: 'team' } }] }, { text: ['Done.'] }),
      tools: [notify],
      onConfirm: () => { asked += 1; return { decision: 'approveForSession' }; },
    });
    await session.send('Notify twice');
    assert.deepEqual(calls, ['team', 'team']);
    assert.equal(asked, 1, 'the second call ran under the rule the first decision added');
    const changed = await session.setApprovalRules({ add: [{ tool: 'other' }] });
    assert.ok(changed);
  });
});
