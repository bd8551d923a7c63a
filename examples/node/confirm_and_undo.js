// Confirmation before a risky call, and undo when a turn fails.
//
// `deploy` asks for confirmation (`confirmation: "always"`): this script
// approves staging and denies production from the event stream with
// session.confirm(). `write_file` returns `{content, undo}`; when the turn
// later fails (here `publish` throws), the server asks the client to undo
// every recorded call, newest first, and the send rejects with
// ToolExecutorError whose `cause` is what the tool threw.
//
// Offline on the scripted provider: a deterministic stand-in, not a language model.
import { Client, ToolExecutorError, scripted, tool } from '../../clients/node/src/index.js';

const objectOf = (properties) => ({ type: 'object', properties, required: Object.keys(properties) });

const deploy = tool({
  name: 'deploy',
  description: 'Deploy the site to an environment',
  inputSchema: objectOf({ env: { type: 'string' } }),
  confirmation: 'always',
  run: ({ env }) => `deployed to ${env}`,
});

const files = new Map([['index.md', 'old home page']]);
const writeFile = tool({
  name: 'write_file',
  description: 'Write a text file',
  inputSchema: objectOf({ path: { type: 'string' }, text: { type: 'string' } }),
  run: ({ path, text }) => {
    const previous = files.get(path);
    files.set(path, text);
    return {
      content: `wrote ${text.length} characters to ${path}`,
      undo: () => {
        console.log(`  undo: restore ${path}`);
        if (previous === undefined) files.delete(path);
        else files.set(path, previous);
      },
    };
  },
});
const publish = tool({
  name: 'publish',
  description: 'Publish a file',
  inputSchema: objectOf({ path: { type: 'string' } }),
  run: ({ path }) => { throw new Error(`no permission to publish ${path}`); },
});

console.log('[scripted provider: a deterministic stand-in, not a language model]');
const client = await Client.spawn();
try {
  const ops = await client.openSession({
    model: scripted(
      { toolCalls: [{ name: 'deploy', arguments: { env: 'staging' } }, { name: 'deploy', arguments: { env: 'prod' } }] },
      { text: ['Staging is live; production was declined.'] },
    ),
    tools: [deploy],
  });
  for await (const event of ops.stream('Deploy everywhere.')) {
    if (event.type === 'confirmationRequested') {
      const approve = event.arguments.env !== 'prod';
      console.log(`confirm ${event.name}(${event.arguments.env})? ${approve ? 'yes' : 'no'}`);
      await ops.confirm(event.callId, approve, approve ? {} : { reason: 'not on a Friday' });
    }
    if (event.type === 'toolCallFinished') console.log(`  ${event.outcome}: ${event.content}`);
    if (event.type === 'textDelta') console.log(`agent: ${event.delta}`);
  }

  const site = await client.openSession({
    model: scripted(
      { toolCalls: [{ name: 'write_file', arguments: { path: 'index.md', text: 'new home' } }] },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'about.md', text: 'about us' } }] },
      { toolCalls: [{ name: 'publish', arguments: { path: 'index.md' } }] },
    ),
    tools: [writeFile, publish],
  });
  try {
    await site.send('Update the site and publish it.');
  } catch (error) {
    if (!(error instanceof ToolExecutorError)) throw error;
    console.log(`turn failed in ${error.toolName}: ${error.cause.message}`);
  }
  console.log('files afterwards:', Object.fromEntries(files));
} finally {
  await client.close();
}
