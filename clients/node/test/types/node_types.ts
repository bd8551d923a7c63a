// Checked with node-globals-like.d.ts, standing in for @types/node
// (tsconfig.node-types.json): the signals the client hands out are Node's
// AbortSignal, and Node's AbortController works with the client.
import { Client, tool } from 'agentrpc';
import type { HostAbortSignal } from 'agentrpc';
import { expectType } from './typed_usage.js';

declare const signal: HostAbortSignal;
expectType<AbortSignal>()(signal);

export const waiter = tool({
  name: 'wait',
  run: ({ ms }: { ms: number }, ctx) => {
    ctx.signal.throwIfAborted();
    return ms;
  },
});

export async function cancelWithNodesController(client: Client): Promise<void> {
  const session = await client.openSession({ tools: [waiter] });
  const controller = new AbortController();
  const pending = session.send('Wait a second.', { signal: controller.signal });
  controller.abort();
  await pending.catch(() => undefined);
  await client[Symbol.asyncDispose]();
}
