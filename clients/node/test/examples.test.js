// Every example of examples/node runs against the real binary on the scripted
// provider, and docs/node.md shows each one verbatim with the output it prints.
//
// docs/node.md embeds a file after `<!-- example: PATH -->` and its output
// after `<!-- output: PATH -->`. After changing an example, rewrite those
// blocks with: AGENTRPC_UPDATE_DOCS=1 node --test clients/node/test/examples.test.js

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { BINARY, REPO } from '../test-support/helpers.js';

const run = promisify(execFile);
const DOC = join(REPO, 'docs', 'node.md');
const EXAMPLES = join(REPO, 'examples', 'node');
const BLOCK = /<!-- (example|output): (\S+) -->\n```(\w+)\n([\s\S]*?)```/g;

async function runExample(path) {
  const { stdout } = await run(process.execPath, [path], {
    cwd: REPO, env: { ...process.env, AGENTRPC_BIN: BINARY }, timeout: 30000, maxBuffer: 1 << 20,
  });
  return stdout;
}

describe('examples/node', () => {
  const files = readdirSync(EXAMPLES).filter((f) => f.endsWith('.js')).sort();
  const outputs = new Map();

  for (const file of files) {
    test(`${file} runs`, async () => {
      const stdout = await runExample(join(EXAMPLES, file));
      assert.ok(stdout.trim().length > 0);
      outputs.set(`examples/node/${file}`, stdout);
    });
  }

  test('docs/node.md shows every example verbatim with its output', async () => {
    let doc = readFileSync(DOC, 'utf8');
    for (const file of files) {
      const path = `examples/node/${file}`;
      if (!outputs.has(path)) outputs.set(path, await runExample(join(REPO, path)));
    }
    const render = (kind, path) => (kind === 'example' ? readFileSync(join(REPO, path), 'utf8') : outputs.get(path));
    if (process.env.AGENTRPC_UPDATE_DOCS === '1') {
      doc = doc.replace(BLOCK, (_, kind, path, lang) => `<!-- ${kind}: ${path} -->\n\`\`\`${lang}\n${render(kind, path)}\`\`\``);
      writeFileSync(DOC, doc);
    }
    const shown = new Set();
    for (const [, kind, path, , body] of doc.matchAll(BLOCK)) {
      assert.ok(outputs.has(path), `docs/node.md embeds ${path}, which is not an example`);
      assert.equal(body, render(kind, path), `the ${kind} block of ${path} in docs/node.md is stale: rerun with AGENTRPC_UPDATE_DOCS=1`);
      shown.add(`${kind}:${path}`);
    }
    for (const path of outputs.keys()) {
      assert.ok(shown.has(`example:${path}`) && shown.has(`output:${path}`), `docs/node.md shows ${path} and its output`);
    }
  });
});
