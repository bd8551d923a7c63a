// Every method of schema/index.json has its place in the client's API. When a
// method is added to the schema this test fails until the client covers it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client, METHODS, Session, TurnStream } from '../src/index.js';

// method → where the client speaks it: "Class.member", or how it is handled.
const API = {
  initialize: 'Client.initialize',
  shutdown: 'Client.close',
  exit: 'Client.close',
  'session/create': 'Client.openSession',
  'session/send': ['Session.send', 'Session.stream', 'TurnStream.next'],
  'session/generate': 'Session.generate',
  'session/cancel': 'Session.cancel',
  'session/confirm': 'Session.confirm',
  'session/getState': 'Session.getState',
  'session/getTranscript': 'Session.getTranscript',
  'session/getPrompt': 'Session.getPrompt',
  'session/getMedia': 'Session.getMedia',
  'session/mutateTranscript': 'Session.mutateTranscript',
  'session/setProperties': 'Session.setProperties',
  'session/list': 'Client.listSessions',
  'session/close': 'Session.close',
  'session/resume': 'Client.resumeSession',
  'session/delete': 'Session.delete',
  'session/fork': 'Session.fork',
  'session/steer': 'Session.steer',
  'session/setApprovalRules': 'Session.setApprovalRules',
  'session/rewind': 'Session.rewind',
  'session/compact': 'Session.compact',
  'session/continue': 'Session.continueTurn',
  'session/park': 'Session.park',
  'user/ask': 'onAsk handlers, answered by the client',
  'user/elicit': 'Client onElicitation handler, answered by the client',
  // session/cancel as a notification: Session.cancel sends the request form, which answers wasRunning.
  '$/cancelRequest': 'Client.request', // an aborted signal, a timeout, leaving a stream early
  'session/event': ['Session.events', 'Session.stream', 'Client.onNotification'],
  'trace/span': 'Client.onNotification',
  'tool/call': 'tool() run functions, answered by the client',
  'tool/undo': 'undo functions a tool returned, answered by the client',
  'tool/progress': 'a tool run function\'s ctx.reportProgress',
  'confirmation/request': 'onConfirm handlers, answered by the client',
  'hook/call': 'Client.onRequest',
  'context/refresh': 'Client.onRequest',
};
const CLASSES = { Client, Session, TurnStream };

test('every method of the schema is spoken by the client API', () => {
  const missing = METHODS.map((m) => m.method).filter((m) => !(m in API));
  assert.deepEqual(missing, [], `methods the Node client does not cover yet: ${missing.join(', ')}`);
  for (const [method, where] of Object.entries(API)) {
    for (const place of [where].flat()) {
      const match = /^(\w+)\.(\w+)$/.exec(place);
      if (!match) continue;
      const [, cls, member] = match;
      assert.equal(typeof CLASSES[cls].prototype[member], 'function', `${method}: ${place} exists`);
    }
  }
});
