// Tool calls the server runs in parallel (docs/protocol.md §5 "Calls in parallel"), handled
// concurrently by the client, against the real binary. No timing is asserted: a handler that needs
// its siblings waits for them, bounded, so calls handled one after the other fail instead of passing slowly.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { scripted, tool } from '../src/index.js';
import { collect, objectSchema, spawnReal, within } from '../test-support/helpers.js';

const calls = (name, argsList) => argsList.map((args, i) => ({ name, arguments: args, id: `c${i + 1}` }));

describe('tool calls in parallel', () => {
  let client;
  before(async () => { client = await spawnReal(); });
  after(async () => { await client.close(); });

  test('the declaration carries parallel as given, and checks it', () => {
    const run = () => 'x';
    assert.equal(tool({ name: 'a', parallel: false, run }).spec.parallel, false);
    assert.equal(tool({ name: 'b', parallel: true, run }).spec.parallel, true);
    assert.equal('parallel' in tool({ name: 'c', run }).spec, false);
    assert.throws(() => tool({ name: 'd', parallel: 'yes', run }), /parallel must be true or false/);
  });

  test('concurrent tool/calls run concurrently; outputs are recorded in call order', async () => {
    const started = [];
    let allStarted;
    const three = new Promise((resolve) => { allStarted = resolve; });
    const read = tool({
      name: 'read',
      annotations: { readOnly: true },
      inputSchema: objectSchema({ path: { type: 'string' } }),
      run: async ({ path }) => {
        started.push(path);
        if (started.length === 3) allStarted();
        // Answers only once all three calls are running here at once.
        await within(three, 10000, 'all three calls to be running');
        return `contents of ${path}`;
      },
    });
    const session = await client.openSession({
      model: scripted({ toolCalls: calls('read', [{ path: 'a' }, { path: 'b' }, { path: 'c' }]) }, { text: ['Read.'] }),
      tools: [read],
    });
    const result = await session.send('Read a, b and c');
    assert.equal(result.toolCalls, 3);
    assert.deepEqual([...started].sort(), ['a', 'b', 'c']);
    const outputs = (await session.getTranscript()).entries.filter((e) => e.type === 'toolOutput').map((e) => e.content);
    assert.deepEqual(outputs, ['contents of a', 'contents of b', 'contents of c']);
  });

  test('a tool declared parallel: false runs alone, even when read-only', async () => {
    const count = tool({ name: 'count', parallel: false, annotations: { readOnly: true }, run: ({ n }) => n });
    const session = await client.openSession({
      model: scripted({ toolCalls: calls('count', [{ n: 1 }, { n: 2 }]) }, { text: ['Counted.'] }),
      tools: [count],
    });
    const events = (await collect(session.stream('Count')))
      .filter((e) => e.type === 'toolCallStarted' || e.type === 'toolCallFinished')
      .map((e) => `${e.type} ${e.callId}`);
    // The second starts only once the first has finished.
    assert.deepEqual(events, ['toolCallStarted c1', 'toolCallFinished c1', 'toolCallStarted c2', 'toolCallFinished c2']);
  });
});
