// Structured output: session.generate(input, {schema}) returns a value the
// server validated against the JSON Schema; a violation rejects with
// StructuredOutputError.
//
// Offline on the scripted provider: a deterministic stand-in, not a language model.
import { Client, StructuredOutputError, scripted } from '../../clients/node/src/index.js';

const schema = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    celsius: { type: 'number' },
    tags: { type: 'array', items: { type: 'string' } },
  },
  required: ['city', 'celsius'],
};

console.log('[scripted provider: a deterministic stand-in, not a language model]');
const client = await Client.spawn();
try {
  const session = await client.openSession({
    model: scripted({ text: ['{"city": "Paris", ', '"celsius": 18, "tags": ["sunny"]}'] }, { text: ['{"city": "Oslo"}'] }),
  });
  const { value } = await session.generate('Weather in Paris, as JSON.', { schema });
  console.log(`${value.city}: ${value.celsius} °C, ${value.tags.join(', ')}`);
  try {
    await session.generate('Weather in Oslo, as JSON.', { schema });
  } catch (error) {
    if (!(error instanceof StructuredOutputError)) throw error;
    console.log(`rejected: ${error.data.reason}`);
  }
} finally {
  await client.close();
}
