// A conversation with a tool call, streamed as it arrives.
//
// Runs offline on the built-in *scripted* provider: a deterministic stand-in
// that replays the script below, not a language model. Pass a model name from
// agentrpc.json (`node examples/node/quickstart.js gpt`) to ask a real one.
import { Client, scripted, tool } from '../../clients/node/src/index.js';

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  // The tool runs here, in the client: the server only asks for it.
  run: async ({ city }) => ({ city, celsius: 18, sky: 'sunny' }),
});

const model = process.argv[2] ?? scripted(
  { text: ['Let me check ', 'the weather in Paris.'], toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] },
  { text: ['It is ', '18 °C and sunny ', 'in Paris.'], usage: { inputTokens: 42, outputTokens: 9 } },
);
console.log(`[model: ${typeof model === 'string' ? model : 'the scripted provider, a stand-in that is not a language model'}]`);

const client = await Client.spawn(); // finds .build/debug/agentrpc or $AGENTRPC_BIN
try {
  const session = await client.openSession({ model, tools: [getWeather] });
  const stream = session.stream("What's the weather in Paris?");
  for await (const event of stream) {
    if (event.type === 'textDelta') process.stdout.write(event.delta);
    if (event.type === 'toolCallStarted') console.log(`\n  → ${event.name}(${JSON.stringify(event.arguments)})`);
    if (event.type === 'toolCallFinished') console.log(`  ← ${event.outcome}: ${JSON.stringify(event.content)}`);
  }
  const { roundTrips, toolCalls, usage } = stream.result;
  console.log(`\n[${roundTrips} round trips, ${toolCalls} tool call(s), ${usage.inputTokens} in / ${usage.outputTokens} out tokens]`);
} finally {
  await client.close();
}
