// Cancelling a turn with an AbortController, and by leaving a stream early.
//
// The scripted model streams a little and then stalls, as a slow model would.
// Aborting the signal withdraws the send ($/cancelRequest): it rejects with
// CancelledError, which keeps the text streamed so far. Breaking out of a
// `for await` over session.stream() cancels the same way, and the session takes
// the next turn at once.
//
// Offline on the scripted provider: a deterministic stand-in, not a language model.
import { CancelledError, Client, scripted } from '../../clients/node/src/index.js';

console.log('[scripted provider: a deterministic stand-in, not a language model]');
const client = await Client.spawn();
try {
  const session = await client.openSession({
    model: scripted({ text: ['Once upon ', 'a time'], stall: true }, { text: ['Here is ', 'a long story'], stall: true }, { text: ['Short one.'] }),
  });

  const controller = new AbortController();
  // Abort once the model has said something (a UI would do it on a button press).
  const watch = session.events();
  const pending = session.send('Tell me a story.', { signal: controller.signal });
  for await (const event of watch) {
    if (event.type === 'textDelta' && event.delta === 'a time') break;
  }
  controller.abort();
  try {
    await pending;
  } catch (error) {
    if (!(error instanceof CancelledError)) throw error;
    console.log(`cancelled (${error.data.source}); partial text: ${JSON.stringify(error.partialText)}`);
  }

  let text = '';
  for await (const event of session.stream('Another one.')) {
    if (event.type === 'textDelta') text += event.delta;
    if (text.length > 8) break; // leaving the loop cancels the turn
  }
  console.log(`left the stream after ${JSON.stringify(text)}`);

  const result = await session.send('A short one, then.');
  console.log(`next turn: ${result.message.text}`);
} finally {
  await client.close();
}
