// Editing the transcript: read it, then rewrite it with ops, all or nothing,
// guarded by the revision you read (a concurrent edit is RevisionMismatchError).
//
// Offline on the scripted provider: a deterministic stand-in, not a language model.
import { Client, RevisionMismatchError, ops, scripted } from '../../clients/node/src/index.js';

console.log('[scripted provider: a deterministic stand-in, not a language model]');
const client = await Client.spawn();
try {
  const session = await client.openSession({ model: scripted({ text: ['Paris.'] }, { text: ['Rome.'] }, { text: ['About 2.1 million.'] }) });
  await session.send('Capital of France?');
  await session.send('Capital of Italy?');
  const before = await session.getTranscript();
  const show = (t) => t.entries.map((e) => `${e.type}: ${e.text}`).join(' | ');
  console.log(`revision ${before.revision}: ${show(before)}`);

  // Drop the Italy exchange and correct an answer, in one step.
  const [, franceAnswer] = before.entries;
  const result = await session.mutateTranscript([
    ops.truncateAfter(franceAnswer.id),
    ops.replace(franceAnswer.id, ops.response('Paris (since 508).', { id: franceAnswer.id })),
  ], { expectedRevision: before.revision });
  console.log(`revision ${result.revision}: ${show(await session.getTranscript())}`);

  try {
    await session.mutateTranscript(ops.truncateAfter(null), { expectedRevision: before.revision });
  } catch (error) {
    if (!(error instanceof RevisionMismatchError)) throw error;
    console.log(`stale edit refused: expected ${error.data.expectedRevision}, now ${error.data.revision}`);
  }

  const answer = await session.send('How many people live there?');
  console.log(`the model continues from the edited history: ${answer.message.text}`);
} finally {
  await client.close();
}
