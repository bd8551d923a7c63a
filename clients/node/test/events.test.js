// Every event type of the schema arrives through the typed event stream, each
// with its sessionId, turnId (inside a turn) and seq. When a new event type is
// added to the schema, EVENT_TYPES grows and this test fails until a scenario
// here produces it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_CAPABILITIES, EVENT_TYPES, ops, scripted, tool } from '../src/index.js';
import { MCP_SERVER, collect, nextMatching, objectSchema, spawnReal } from '../test-support/helpers.js';

test('every event type of the schema reaches session.stream() / session.events(), typed', async () => {
  const client = await spawnReal({ capabilities: { ...DEFAULT_CAPABILITIES, hooks: true, contextSources: true } });
  const seen = new Map();
  const record = (events) => { for (const e of events) if (!seen.has(e.type)) seen.set(e.type, e); };
  try {
    client.onRequest('hook/call', () => ({}));
    let refreshes = 0;
    client.onRequest('context/refresh', () => {
      refreshes += 1;
      if (refreshes > 1) throw new Error('editor not ready');
      return { values: { editor: 'main.js' } };
    });
    const echo = tool({ name: 'echo', inputSchema: objectSchema({}), confirmation: 'always', run: () => 'e' });
    const session = await client.openSession({
      model: scripted(
        { reasoning: ['Hm'], text: ['Hi'], usage: { inputTokens: 1, outputTokens: 1 }, toolCalls: [{ name: 'echo', arguments: {} }] },
        { error: { code: 'rateLimited', afterSeconds: 0.01 } },
        { text: ['done'] },
        { text: ['again'] },
      ),
      tools: [echo, { name: 'odd', inputSchema: { type: 'string' } }],
      contextSources: [{ name: 'editor' }],
      profiles: { cases: { main: { tools: ['echo', 'odd'] } }, defaults: { hooks: { onPrompt: [{ client: true }] } } },
      onConfirm: () => true,
    });
    record(await collect(session.stream('first')));
    const watch = session.events();
    await session.setProperties({ set: { mode: 'x' } });
    record([await nextMatching(watch, (e) => e.type === 'propertiesChanged', 5000, 'propertiesChanged')]);
    await watch.return();
    const { entries } = await session.getTranscript();
    await session.mutateTranscript(ops.remove(entries[0].id));
    record(await collect(session.stream('second')));

    // Steering a turn while its tool runs (steeringApplied); a standing rule (approvalRulesChanged).
    let release;
    const gate = new Promise((r) => { release = r; });
    let toolStarted;
    const started = new Promise((r) => { toolStarted = r; });
    // It reports progress first (tool/progress → toolProgress).
    const wait = tool({
      name: 'wait', inputSchema: objectSchema({}),
      run: async (_args, ctx) => { await ctx.reportProgress(1, 2, 'waiting'); toolStarted(); await gate; return 'done'; },
    });
    const steered = await client.openSession({ model: scripted({ toolCalls: [{ name: 'wait', arguments: {} }] }, { text: ['ok'] }), tools: [wait] });
    const stream = steered.stream('go');
    const consumed = collect(stream);
    await started;
    await steered.steer('and then this');
    release();
    record(await consumed);
    const rules = steered.events();
    await steered.setApprovalRules({ add: [{ tool: 'wait' }] });
    record([await nextMatching(rules, (e) => e.type === 'approvalRulesChanged', 5000, 'approvalRulesChanged')]);
    await rules.return();

    // The engine's update_plan, named in builtinTools: planUpdated.
    const planner = await client.openSession({
      model: scripted({ toolCalls: [{ name: 'update_plan', arguments: { entries: [{ content: 'Write it', priority: 'high', status: 'pending' }] } }] }, { text: ['ok'] }),
      builtinTools: ['update_plan'],
    });
    record(await collect(planner.stream('plan it')));

    // A compaction outside any turn: contextCompacted.
    const long = await client.openSession({
      model: scripted({ text: ['one'] }, { text: ['two'] }, { text: ['the summary'] }),
      compaction: { keepLast: 2 },
    });
    await long.send('first');
    await long.send('second');
    const compactions = long.events();
    const compacted = await long.compact();
    assert.equal(compacted.entriesRemoved, 2);
    record([await nextMatching(compactions, (e) => e.type === 'contextCompacted', 5000, 'contextCompacted')]);
    await compactions.return();

    // An MCP server (a few lines of Python on stdio): mcpServerStatus, outside any turn.
    const mcp = await client.openSession({ model: scripted({ text: ['ok'] }), mcpServers: [{ name: 'calc', command: 'python3', args: ['-c', MCP_SERVER] }] });
    const statuses = mcp.events();
    record([await nextMatching(statuses, (e) => e.type === 'mcpServerStatus' && e.status === 'ready', 10000, 'mcpServerStatus')]);
    await statuses.return();
  } finally {
    await client.close();
  }
  const missing = EVENT_TYPES.filter((type) => !seen.has(type));
  assert.deepEqual(missing, [], `event types no scenario produced: ${missing.join(', ')}`);
  for (const [type, event] of seen) {
    assert.equal(typeof event.sessionId, 'string', `${type}.sessionId`);
    assert.ok(Number.isInteger(event.seq), `${type}.seq`);
    // Events outside a turn carry no turnId.
    if (!['propertiesChanged', 'approvalRulesChanged', 'mcpServerStatus', 'contextCompacted'].includes(type)) assert.equal(typeof event.turnId, 'string', `${type}.turnId`);
  }
  assert.equal(seen.get('retrying').error.data.kind, 'providerError');
  assert.equal(seen.get('cacheInvalidated').reason, 'historyRewritten');
  assert.equal(seen.get('hookFired').hook, 'onPrompt');
  assert.deepEqual(seen.get('mcpServerStatus').tools, ['mcp__calc__add']);
  const progress = seen.get('toolProgress');
  assert.deepEqual([progress.progress, progress.total, progress.message], [1, 2, 'waiting']);
});
