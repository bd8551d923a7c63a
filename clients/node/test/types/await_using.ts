// `await using` (TypeScript 5.2 and later only, so not in typed_usage.ts, which
// TypeScript 4.8 checks too): tsconfig.await-using.json, checked with
// TypeScript 7 by scripts/test, and compiled and run against the real binary by
// clients/node/test/typed-usage.test.js (the compiler's helpers run on Node 20).
import { Client, scripted } from 'agentrpc';

/** A session and a client in `await using` scopes; returns what it saw after each. */
export async function main(binary: string): Promise<string[]> {
  const seen: string[] = [];
  let outer: Client;
  {
    await using client = await Client.spawn({ binary });
    outer = client;
    let id: string;
    {
      await using session = await client.openSession({ model: scripted({ text: ['Scoped.'] }) });
      seen.push(`said: ${(await session.send('Hi')).message.text}`);
      id = session.id;
    }
    const listed = (await client.listSessions()).data.find((s) => s.sessionId === id);
    seen.push(`session loaded after its scope: ${String(listed?.loaded)}`);
  }
  seen.push(`client closed after its scope: ${outer.closed}`);
  return seen;
}

/** What `main` sees. */
export const EXPECTED: readonly string[] = [
  'said: Scoped.',
  'session loaded after its scope: false',
  'client closed after its scope: true',
];
