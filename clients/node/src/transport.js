// The server subprocess: newline-delimited JSON frames on stdin/stdout
// (docs/protocol.md §1), and a stderr that is drained from the first moment
// and never mixed into the protocol.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { ConnectionClosedError } from './errors-base.js';

/** A single stderr line longer than this is cut, so a runaway child cannot grow the tail. */
const MAX_STDERR_LINE = 8192;
const NEWLINE = 0x0a;

/**
 * Splits a byte stream into lines. Pure and incremental: feed it chunks in
 * any split, take complete frames out; a frame over `maxBytes` is an error
 * rather than unbounded memory.
 */
export class LineFramer {
  /** @param {number} maxBytes */
  constructor(maxBytes) {
    this.maxBytes = maxBytes;
    /** @type {Buffer[]} */
    this.parts = [];
    this.size = 0;
  }

  /**
   * @param {Buffer} chunk
   * @returns {Buffer[]} the complete lines (without the newline) in this chunk
   */
  push(chunk) {
    const lines = [];
    let start = 0;
    for (let nl = chunk.indexOf(NEWLINE); nl !== -1; nl = chunk.indexOf(NEWLINE, start)) {
      const piece = chunk.subarray(start, nl);
      if (this.size + piece.length > this.maxBytes) throw this.#tooLarge();
      lines.push(this.parts.length ? Buffer.concat([...this.parts, piece]) : piece);
      this.parts = [];
      this.size = 0;
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (this.size + rest.length > this.maxBytes) throw this.#tooLarge();
      this.parts.push(rest);
      this.size += rest.length;
    }
    return lines;
  }

  #tooLarge() {
    return new ConnectionClosedError(`the server sent a frame over ${this.maxBytes} bytes`);
  }
}

/**
 * One running server process. Calls `onLine(buffer)` per stdout frame and
 * `onClose({exitCode, signal, error})` once, after stdout ended and the process
 * exited (bounded: a child that closes stdout but lingers is reported anyway).
 */
export class ProcessTransport {
  /**
   * @param {object} o
   * @param {string} o.command
   * @param {string[]} o.args
   * @param {NodeJS.ProcessEnv} o.env
   * @param {string} [o.cwd]
   * @param {'collect'|'inherit'|((line: string) => void)} o.stderr
   * @param {number} o.stderrTailLines
   * @param {number} o.maxFrameBytes
   * @param {(line: Buffer) => void} o.onLine
   * @param {(info: {exitCode: number|null, signal: string|null, error?: Error}) => void} o.onClose
   */
  constructor(o) {
    this.stderrLines = [];
    this.stderrPartial = '';
    this.stderrTailLines = Math.max(1, o.stderrTailLines);
    /** How often a write waited for 'drain' (back-pressure observed). */
    this.drainWaits = 0;
    this.exitCode = null;
    this.signal = null;
    this.exited = false;
    this.closed = false;
    this.writeChain = Promise.resolve();
    this.framer = new LineFramer(o.maxFrameBytes);
    const stderrMode = o.stderr === 'inherit' ? 'inherit' : 'pipe';
    this.child = spawn(o.command, o.args, { env: o.env, cwd: o.cwd, stdio: ['pipe', 'pipe', stderrMode] });
    this.spawned = new Promise((resolve, reject) => {
      this.child.once('spawn', resolve);
      this.child.once('error', reject);
    });
    // Catch late errors (EPIPE and the like) so they never become uncaught.
    this.child.on('error', (error) => { this.lastError = error; });
    this.child.stdin.on('error', (error) => { this.lastError = error; });
    const exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exited = true;
        this.exitCode = code;
        this.signal = signal;
        resolve();
      });
      this.child.once('error', resolve);
    });
    this.exitedPromise = exited;
    if (this.child.stderr) {
      this.child.stderr.on('data', (chunk) => this.#stderr(chunk.toString('utf8'), o.stderr));
      this.child.stderr.on('end', () => {
        if (this.stderrPartial) this.#stderrLine(this.stderrPartial, o.stderr);
        this.stderrPartial = '';
      });
    }
    let framingError;
    this.child.stdout.on('data', (chunk) => {
      if (framingError) return;
      let lines;
      try {
        lines = this.framer.push(chunk);
      } catch (error) {
        framingError = error;
        this.child.kill('SIGKILL');
        return;
      }
      for (const line of lines) o.onLine(line);
    });
    const stdoutEnded = new Promise((resolve) => {
      this.child.stdout.once('close', resolve);
      this.child.once('error', resolve);
    });
    stdoutEnded.then(async () => {
      // stdout is gone; give the process a bounded moment to report its exit.
      await Promise.race([exited, delay(2000)]);
      this.closed = true;
      o.onClose({ exitCode: this.exitCode, signal: this.signal, error: framingError ?? this.lastError });
    });
  }

  get pid() {
    return this.child.pid;
  }

  /** The server's most recent stderr lines (bounded), newline-joined. */
  get stderrTail() {
    const lines = this.stderrPartial ? [...this.stderrLines, this.stderrPartial] : this.stderrLines;
    return lines.length ? `${lines.join('\n')}\n` : '';
  }

  #stderr(text, mode) {
    const parts = (this.stderrPartial + text).split('\n');
    this.stderrPartial = parts.pop() ?? '';
    if (this.stderrPartial.length > MAX_STDERR_LINE) {
      this.#stderrLine(`${this.stderrPartial.slice(0, MAX_STDERR_LINE)} …[truncated]`, mode);
      this.stderrPartial = '';
    }
    for (const line of parts) this.#stderrLine(line, mode);
  }

  #stderrLine(line, mode) {
    this.stderrLines.push(line.length > MAX_STDERR_LINE ? `${line.slice(0, MAX_STDERR_LINE)} …[truncated]` : line);
    if (this.stderrLines.length > this.stderrTailLines) this.stderrLines.shift();
    if (typeof mode === 'function') {
      try { mode(line); } catch { /* a faulty listener must not kill the connection */ }
    }
  }

  /**
   * Writes one frame. Writes are chained, and each waits for 'drain' when the
   * pipe is full, so a server that stops reading holds back the writer instead
   * of growing the buffer without bound.
   * @param {string} text a serialized message without the newline
   * @returns {Promise<void>}
   */
  write(text) {
    const run = this.writeChain.then(() => this.#writeNow(`${text}\n`));
    this.writeChain = run.catch(() => {});
    return run;
  }

  async #writeNow(frame) {
    const stdin = this.child.stdin;
    if (this.closed || !stdin.writable) {
      throw new ConnectionClosedError("the server's stdin is closed", { exitCode: this.exitCode, signal: this.signal, stderrTail: this.stderrTail });
    }
    if (!stdin.write(frame)) {
      this.drainWaits += 1;
      // 'close' too: a server that dies with a full pipe never drains it.
      await Promise.race([once(stdin, 'drain'), once(stdin, 'close'), once(stdin, 'error').catch(() => {})]);
    }
  }

  /** Close stdin (the server then exits), bounded by the pending writes. */
  async endInput(timeoutMs) {
    await Promise.race([this.writeChain, delay(timeoutMs)]);
    try { this.child.stdin.end(); } catch { /* already closed */ }
  }

  /** Waits for the process to exit; SIGTERM, then SIGKILL after `timeoutMs` each. */
  async stop(timeoutMs) {
    if (this.exited) return;
    if (await within(this.exitedPromise, timeoutMs)) return;
    this.child.kill('SIGTERM');
    if (await within(this.exitedPromise, timeoutMs)) return;
    this.child.kill('SIGKILL');
    await within(this.exitedPromise, timeoutMs);
  }
}

/** A promise that resolves after `ms`, without keeping the process alive. */
export function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** True if `promise` settled within `ms`. */
async function within(promise, ms) {
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve(false), ms); timer.unref(); });
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
