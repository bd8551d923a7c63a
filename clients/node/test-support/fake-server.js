#!/usr/bin/env node
// A stand-in server for failure modes the real one does not produce on
// demand: it speaks just enough JSON-RPC, and `process.argv[2]` picks how it
// misbehaves:
//   die-mid-turn   answers session/send with one textDelta event, then exits with code 3
//   noisy-stderr   writes lines to stderr (some that look like JSON-RPC) around every answer
//   (any mode)     `hang` is never answered
//   slow-reader    does not read stdin until it gets SIGUSR2, so a client writing a
//                  lot meanwhile fills the pipe and must wait for 'drain'
// In every mode, `echo` answers with the byte size of its params.
import { createInterface } from 'node:readline';

const mode = process.argv[2] ?? '';
const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const answer = (id, result) => send({ jsonrpc: '2.0', id, result });

function serve() {
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  let message;
  try { message = JSON.parse(line); } catch { return; }
  const { id, method, params } = message;
  if (mode === 'noisy-stderr') process.stderr.write(`{"jsonrpc":"2.0","id":${id},"result":"from stderr, not the protocol"}\nlog: got ${method}\n`);
  switch (method) {
    case 'initialize':
      answer(id, { protocolVersion: 1, serverInfo: { name: 'fake', version: '0' }, capabilities: {} });
      break;
    case 'session/create':
      answer(id, { sessionId: 's-fake', revision: 0, activeProfile: 'default' });
      break;
    case 'session/send':
      send({ jsonrpc: '2.0', method: 'session/event', params: { sessionId: 's-fake', turnId: 't-fake', seq: 1, event: { type: 'textDelta', delta: 'Hal' } } });
      if (mode === 'die-mid-turn') {
        process.stderr.write('fake: dying mid-turn\n');
        process.exit(3);
      }
      break;
    case 'echo':
      answer(id, { bytes: JSON.stringify(params).length });
      break;
    case 'hang':
      break; // never answered
    case 'shutdown':
      answer(id, null);
      break;
    case 'exit':
      process.exit(0);
      break;
    default:
      if (id !== undefined) send({ jsonrpc: '2.0', id, error: { code: -32601, message: 'no', data: { kind: 'methodNotFound' } } });
  }
});
lines.on('close', () => process.exit(0));
}

// readline starts reading at once, so the slow reader creates it only when told.
// `fake/ready` says the signal handler is in place (before it, SIGUSR2 would kill us).
if (mode === 'slow-reader') {
  // Nothing else keeps the process alive while stdin is not read.
  const keepAlive = setInterval(() => {}, 1 << 30);
  process.once('SIGUSR2', () => { clearInterval(keepAlive); serve(); });
  send({ jsonrpc: '2.0', method: 'fake/ready' });
} else {
  serve();
}
