// Checked with the dom lib (tsconfig.dom.json): the dom's own AbortController
// works with the client, and a signal the client hands out is the dom's
// AbortSignal, so it goes on to fetch() as it is.
import { Client, tool } from 'agentrpc';
import type { HostAbortSignal } from 'agentrpc';
import { expectType } from './typed_usage.js';

declare const signal: HostAbortSignal;
expectType<AbortSignal>()(signal);

export const fetcher = tool({
  name: 'fetch_page',
  run: async ({ url }: { url: string }, ctx) => (await fetch(url, { signal: ctx.signal })).text(),
});

export async function cancelWithTheDomController(client: Client): Promise<void> {
  const session = await client.openSession({ tools: [fetcher] });
  const controller = new AbortController();
  const pending = session.send('Fetch example.com', { signal: controller.signal });
  controller.abort(new Error('the user left'));
  await pending.catch(() => undefined);
}
