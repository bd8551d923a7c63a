// Builders for `session/mutateTranscript` operations and entries
// (docs/protocol.md §10). The server applies a list of operations all or none.
//
//   await session.mutateTranscript([ops.truncateAfter(id)], {expectedRevision: 4});
//
// Entry builders fill in a fresh client-side id (`c-…`) unless given one,
// because every entry of a transcript needs a unique id.

import { randomUUID } from 'node:crypto';

/** A fresh entry id for an entry made on the client. */
export function newId() {
  return `c-${randomUUID().replace(/-/g, '').slice(0, 12)}`;
}

const list = (x) => (Array.isArray(x) ? [...x] : [x]);

export const ops = Object.freeze({
  /** Remove the entries with these ids (one id or many). */
  remove: (ids) => ({ op: 'remove', ids: list(ids) }),
  /** Keep entries up to and including `id`; `null` empties the transcript. */
  truncateAfter: (id) => ({ op: 'truncateAfter', id }),
  /** Replace one entry (the new entry may keep the same id). */
  replace: (id, entry) => ({ op: 'replace', id, entry: { ...entry } }),
  /** Insert entries after `after` (`null`: at the start). */
  insert: (after, entries) => ({ op: 'insert', after, entries: list(entries) }),
  /** Replace the whole transcript. */
  set: (entries) => ({ op: 'set', entries: list(entries) }),

  /** A `prompt` entry (a user's input). */
  prompt: (text, { id, images } = {}) => ({ id: id ?? newId(), type: 'prompt', text, ...(images ? { images } : {}) }),
  /** A `response` entry (the model's answer). */
  response: (text, { id } = {}) => ({ id: id ?? newId(), type: 'response', text }),
  /** A `reasoning` entry. */
  reasoning: (text, { id } = {}) => ({ id: id ?? newId(), type: 'reasoning', text }),
  /** A `toolCalls` entry; each call is `{callId, name, arguments}`. */
  toolCalls: (calls, { id } = {}) => ({ id: id ?? newId(), type: 'toolCalls', calls: list(calls) }),
  /** A `toolOutput` entry answering `callId`. */
  toolOutput: (callId, name, content, { outcome = 'ok', id } = {}) =>
    ({ id: id ?? newId(), type: 'toolOutput', callId, name, outcome, content }),
});
