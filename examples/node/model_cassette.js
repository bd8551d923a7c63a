// A real model's answers, recorded once and replayed offline (a model cassette).
//
// By default this replays examples/cassettes/weather-node.jsonl: no model, no
// key, no network, the same answer every time. To record it again with the
// repository's local model: `scripts/local-model serve 8642` in another shell,
// then `node examples/node/model_cassette.js --record`. See docs/testing.md.
import { fileURLToPath } from 'node:url';
import { Client, tool } from '../../clients/node/src/index.js';

// `--cassette PATH` and `--port N` (where the local model listens while recording) change the defaults.
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
};
const cassette = option('--cassette', fileURLToPath(new URL('../cassettes/weather-node.jsonl', import.meta.url)));
const port = Number(option('--port', '8642'));
const record = process.argv.includes('--record');

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  run: async ({ city }) => ({ city, celsius: 18, sky: 'sunny' }),
});

// The local model as the session names it; a replay never connects to it.
const model = {
  provider: 'openai', model: 'smollm2', baseURL: `http://127.0.0.1:${port}/v1`,
  options: { streamTools: false, maxOutputTokens: 48, temperature: 0 },
};

const client = await Client.spawn({ args: ['--ephemeral'], cassette: { path: cassette, mode: record ? 'record' : 'replay' } });
try {
  const session = await client.openSession({
    model, tools: [getWeather],
    // Force the lookup, then answer without tools: a 135M model would otherwise keep calling it.
    properties: { phase: 'lookup' },
    profiles: {
      selector: 'phase',
      cases: {
        lookup: { tools: ['get_weather'], options: { toolChoice: { tool: 'get_weather' } }, hooks: { onToolOutput: [{ set: { phase: 'answer' } }] } },
        answer: { instructions: ['Answer in one sentence from the tool result.'], options: { toolCallingMode: 'disallowed' } },
      },
    },
  });
  const result = await session.send("What's the weather in Paris?");
  console.log(`${result.toolCalls} tool call, ${result.roundTrips} round trips: ${result.message.text.trim()}`);
} finally {
  await client.close();
}
