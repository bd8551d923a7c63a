// The typed usage files (test/types/) do at run time what their types say:
// compiled by a TypeScript compiler and run against the real binary, each sees
// what it expects. So the declarations are shown to match the JavaScript, not
// only to type-check (scripts/test type-checks the same files).
//
// typed_usage.ts is compiled by tsc (Debian's node-typescript, which
// scripts/test installs and then sets AGENTRPC_REQUIRE_TSC=1, so a missing
// compiler fails there instead of skipping); await_using.ts, which needs
// TypeScript 5.2+, by the TypeScript 7 compiler whose path scripts/test puts in
// AGENTRPC_TSGO.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { BINARY, REPO, within } from '../test-support/helpers.js';
import { findTsc } from '../test-support/tsc.js';

const run = promisify(execFile);
const NODE_DIR = join(REPO, 'clients', 'node');
const TYPES = join(NODE_DIR, 'test', 'types');

/** Compiles a project of test/types with `compiler`, runs `main` of `file` against the binary. */
async function compileAndRun(compiler, config, file) {
  // Inside the package, so the compiled file's `import ... from 'agentrpc'`
  // resolves to this package by its name, as the type check did.
  mkdirSync(join(NODE_DIR, '.build'), { recursive: true });
  const out = mkdtempSync(join(NODE_DIR, '.build', 'typed-usage-'));
  try {
    await run(compiler, ['-p', join(TYPES, config), '--noEmit', 'false', '--rootDir', TYPES, '--outDir', out], {
      cwd: NODE_DIR, timeout: 120000,
    }).catch((error) => assert.fail(`${compiler} -p ${config} failed:\n${error.stdout}${error.stderr}`));
    const usage = await import(pathToFileURL(join(out, file.replace(/\.ts$/, '.js'))).href);
    const seen = await within(usage.main(BINARY), 60000, `${file} to run`);
    assert.deepEqual(seen, usage.EXPECTED);
  } finally {
    rmSync(out, { recursive: true, force: true });
    try { rmdirSync(join(NODE_DIR, '.build')); } catch { /* not empty: someone else's files are there too */ }
  }
}

test('typed_usage.ts, compiled by tsc, runs against the real binary and sees what it expects', async (t) => {
  const tsc = findTsc();
  if (!tsc) {
    assert.notEqual(process.env.AGENTRPC_REQUIRE_TSC, '1', 'AGENTRPC_REQUIRE_TSC=1 but tsc is not on PATH');
    t.skip('tsc is not on PATH (apt-get install node-typescript): typed_usage.ts was not compiled or run');
    return;
  }
  await compileAndRun(tsc, 'tsconfig.json', 'typed_usage.ts');
});

test('await_using.ts, compiled by TypeScript 7, closes the session and the client at the end of their scopes', async (t) => {
  const tsgo = process.env.AGENTRPC_TSGO;
  if (!tsgo) {
    t.skip('AGENTRPC_TSGO is not set (scripts/test sets it to the TypeScript 7 compiler it installs): await_using.ts was not run');
    return;
  }
  await compileAndRun(tsgo, 'tsconfig.await-using.json', 'await_using.ts');
});
