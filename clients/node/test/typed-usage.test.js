// The typed usage file (test/types/typed_usage.ts) does at run time what its
// types say: compiled by tsc and run against the real binary, it sees what it
// expects. So the declarations are shown to match the JavaScript, not only to
// type-check (scripts/test type-checks the same file).
//
// tsc is Debian's node-typescript, which scripts/test installs; it sets
// AGENTRPC_REQUIRE_TSC=1, so there a missing compiler fails instead of skipping.

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

test('the typed usage file, compiled by tsc, runs against the real binary and sees what it expects', async (t) => {
  const tsc = findTsc();
  if (!tsc) {
    assert.notEqual(process.env.AGENTRPC_REQUIRE_TSC, '1', 'AGENTRPC_REQUIRE_TSC=1 but tsc is not on PATH');
    t.skip('tsc is not on PATH (apt-get install node-typescript): the typed usage file was not compiled or run');
    return;
  }
  // Inside the package, so the compiled file's `import ... from 'agentrpc'`
  // resolves to this package by its name, as the type check did.
  mkdirSync(join(NODE_DIR, '.build'), { recursive: true });
  const out = mkdtempSync(join(NODE_DIR, '.build', 'typed-usage-'));
  try {
    await run(tsc, ['-p', join(NODE_DIR, 'test', 'types', 'tsconfig.json'), '--noEmit', 'false', '--rootDir', join(NODE_DIR, 'test', 'types'), '--outDir', out], {
      cwd: NODE_DIR, timeout: 120000,
    }).catch((error) => assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`));
    const usage = await import(pathToFileURL(join(out, 'typed_usage.js')).href);
    const seen = await within(usage.main(BINARY), 60000, 'the typed usage file to run');
    assert.deepEqual(seen, usage.EXPECTED);
  } finally {
    rmSync(out, { recursive: true, force: true });
    try { rmdirSync(join(NODE_DIR, '.build')); } catch { /* not empty: someone else's files are there too */ }
  }
});
