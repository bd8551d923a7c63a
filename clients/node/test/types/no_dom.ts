// Checked without the dom lib (tsconfig.json): the signals the client hands out
// are the minimal AbortSignalLike, and a Node-only project needs no more.
import type { AbortSignalLike, HostAbortSignal } from 'agentrpc';
import { expectType } from './typed_usage.js';

declare const signal: HostAbortSignal;
expectType<AbortSignalLike>()(signal);
expectType<unknown>()(signal.reason);
