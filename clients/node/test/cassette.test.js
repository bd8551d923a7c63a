// Model cassettes from Node: Client.spawn({ cassette }) records against a
// local model server, then replays with that server gone (docs/testing.md).

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cassetteArgs } from '../src/index.js';
import { spawnReal, within } from '../test-support/helpers.js';

/** A one-answer OpenAI-compatible model server on a free port. */
async function modelServer(text) {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const chunk = (delta, finish) => `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish ?? null }] })}\n\n`;
      response.writeHead(200, { 'Content-Type': 'text/event-stream' });
      response.end(chunk({ content: text }) + chunk({}, 'stop') + 'data: [DONE]\n\n');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, baseURL: `http://127.0.0.1:${server.address().port}/v1` };
}

describe('model cassettes', () => {
  test('spawn({ cassette }) records, then replays without the model', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentrpc-node-cassette-'));
    const path = join(dir, 'hello.jsonl');
    const { server, baseURL } = await modelServer('Recorded once.');
    const model = { provider: 'openai', model: 'm', baseURL };
    try {
      const client = await spawnReal({ args: ['--ephemeral'], cassette: { path, mode: 'record' } });
      try {
        const session = await client.openSession({ model });
        assert.equal((await within(session.send('hello'), 20000, 'the recorded turn')).message.text, 'Recorded once.');
      } finally {
        await client.close();
      }
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    assert.match(readFileSync(path, 'utf8'), /"agentrpcCassette"/);
    const client = await spawnReal({ args: ['--ephemeral'], cassette: path });
    try {
      const session = await client.openSession({ model });
      assert.equal((await within(session.send('hello'), 20000, 'the replayed turn')).message.text, 'Recorded once.');
    } finally {
      await client.close();
    }
  });

  test('cassetteArgs: a bare path replays; a wrong mode is refused', () => {
    assert.deepEqual(cassetteArgs(undefined), []);
    assert.deepEqual(cassetteArgs('c.jsonl'), ['--model-cassette', 'c.jsonl', '--cassette-mode', 'replay']);
    assert.deepEqual(cassetteArgs({ path: 'c.jsonl', mode: 'auto', pace: 'recorded' }),
      ['--model-cassette', 'c.jsonl', '--cassette-mode', 'auto', '--cassette-pace', 'recorded']);
    assert.throws(() => cassetteArgs({ path: 'c.jsonl', mode: 'rewind' }), TypeError);
  });
});
