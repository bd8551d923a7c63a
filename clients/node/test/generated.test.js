// The generated wire types and error classes match schema/ and the error table
// of docs/protocol.md; the declarations cover the runtime.
//
// No TypeScript compiler is available here (no npm registry), so the .d.ts
// files are checked structurally: every schema type, method, event and error
// kind is declared, every name a declaration uses is declared or built in,
// brackets balance, and every runtime export and public method has a
// declaration.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { OUT_DIR, REPO_ROOT, generate, readErrorTable } from '../scripts/generate.js';
import * as api from '../src/index.js';

const SRC = join(REPO_ROOT, 'clients', 'node', 'src');
const read = (path) => readFileSync(path, 'utf8');

describe('generated files', () => {
  const { files, model } = generate();

  test('the committed files equal a fresh generation (run scripts/generate.js if this fails)', () => {
    for (const [name, content] of Object.entries(files)) {
      assert.equal(read(join(OUT_DIR, name)), content,
        `clients/node/src/generated/${name} is stale: run \`node clients/node/scripts/generate.js\``);
    }
    assert.deepEqual(readdirSync(OUT_DIR).sort(), Object.keys(files).sort(), 'no stray generated files');
  });

  test('every schema file, $def, method, event and error kind is declared', () => {
    const wire = files['wire.d.ts'];
    const declared = new Set([...wire.matchAll(/^export (?:interface|type) (\w+)/gm)].map((m) => m[1]));
    for (const name of [...model.defs, ...model.extraTypes, ...model.fileTypes]) assert.ok(declared.has(name), `${name} is declared`);
    const index = JSON.parse(read(join(REPO_ROOT, 'schema', 'index.json')));
    for (const { method } of index.methods) assert.ok(wire.includes(`  ${JSON.stringify(method)}: `), `${method} is in a method map`);
    const schemaEvents = JSON.parse(read(join(REPO_ROOT, 'schema', 'session.event.params.json')))
      .$defs.SessionEventParams.properties.event.oneOf.map((v) => v.properties.type.const);
    assert.deepEqual([...api.EVENT_TYPES], schemaEvents);
    for (const type of schemaEvents) assert.match(wire, new RegExp(`type: ${JSON.stringify(type)};`), `event ${type}`);
    const kinds = JSON.parse(read(join(REPO_ROOT, 'schema', 'error.json'))).$defs.ErrorData.properties.kind.enum;
    assert.deepEqual(api.ERROR_TABLE.map((r) => r.kind), kinds);
  });

  test('every name a declaration refers to is declared or built in', () => {
    const builtins = new Set(['string', 'number', 'boolean', 'null', 'unknown', 'never', 'Record', 'Partial', 'Omit',
      'Extract', 'NonNullable', 'Promise', 'Map', 'AbortSignal', 'AsyncIterableIterator', 'IteratorResult', 'AsyncDisposable',
      'SymbolConstructor', 'PromiseLike',
      'Error', 'Readonly', 'Symbol', 'typeof', 'readonly', 'key', 'any', 'unique', 'symbol', 'true', 'false', 'undefined', 'void', 'keyof', 'extends', 'infer']);
    const files = ['generated/wire.d.ts', 'generated/errors.d.ts', 'generated/protocol.d.ts', 'errors-base.d.ts', 'index.d.ts'];
    const declared = new Set();
    const texts = files.map((f) => read(join(SRC, f)));
    for (const text of texts) {
      for (const m of text.matchAll(/\b(?:interface|type|class|function|const)\s+(\w+)/g)) declared.add(m[1]);
      for (const m of text.matchAll(/import type \{([^}]*)\}/g)) for (const n of m[1].split(',')) declared.add(n.trim());
      for (const m of text.matchAll(/<(\w+)(?: extends|\s*=)/g)) declared.add(m[1]); // type parameters
      for (const m of text.matchAll(/\b[MTA] extends/g)) declared.add(m[0][0]);
      for (const m of text.matchAll(/\binfer (\w+)/g)) declared.add(m[1]);
    }
    for (const [i, text] of texts.entries()) {
      // Type positions: after ':' or '=' or '|' or '<' or 'extends' in declarations, capitalised identifiers.
      const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '').replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
      for (const m of code.matchAll(/\b([A-Z]\w*)\b/g)) {
        const name = m[1];
        if (builtins.has(name) || declared.has(name)) continue;
        assert.fail(`${files[i]} uses ${name}, which nothing declares`);
      }
      let depth = 0;
      for (const ch of code) {
        if ('{(['.includes(ch)) depth += 1;
        if ('})]'.includes(ch)) depth -= 1;
        assert.ok(depth >= 0, `${files[i]}: unbalanced brackets`);
      }
      assert.equal(depth, 0, `${files[i]}: unbalanced brackets`);
    }
  });

  test('every runtime export of index.js is declared in index.d.ts (or a file it re-exports)', () => {
    const dts = ['index.d.ts', 'errors-base.d.ts', 'generated/errors.d.ts', 'generated/protocol.d.ts'].map((f) => read(join(SRC, f))).join('\n');
    for (const name of Object.keys(api)) {
      assert.match(dts, new RegExp(`\\b(?:class|function|const) ${name}\\b`), `${name} has a declaration`);
    }
  });

  test('every public method of Client, Session and TurnStream is declared', () => {
    const dts = read(join(SRC, 'index.d.ts'));
    for (const cls of [api.Client, api.Session, api.TurnStream]) {
      const body = dts.slice(dts.indexOf(`export declare class ${cls.name} `));
      const end = body.indexOf('\n}\n');
      const decl = body.slice(0, end);
      const members = Object.getOwnPropertyNames(cls.prototype).filter((n) => n !== 'constructor' && !n.startsWith('_'));
      for (const name of members) assert.match(decl, new RegExp(`\\b${name}\\b`), `${cls.name}.${name} is declared`);
      for (const name of Object.getOwnPropertyNames(cls).filter((n) => !['length', 'name', 'prototype'].includes(n))) {
        assert.match(decl, new RegExp(`static ${name}\\b`), `${cls.name}.${name} is declared`);
      }
    }
  });

  test('the error table parser reads the codes of docs/protocol.md §13', () => {
    const rows = readErrorTable(join(REPO_ROOT, 'docs', 'protocol.md'));
    assert.deepEqual(rows.find((r) => r.kind === 'revisionMismatch'), {
      code: -32013, kind: 'revisionMismatch', when: 'a stale `expectedRevision`', extra: '`expectedRevision`, `revision`',
    });
  });

  test('package.json: name agentrpc, ESM, node >= 20, no dependencies, the same version as VERSION', () => {
    const pkg = JSON.parse(read(join(REPO_ROOT, 'clients', 'node', 'package.json')));
    assert.equal(pkg.name, 'agentrpc');
    assert.equal(pkg.type, 'module');
    assert.equal(pkg.engines.node, '>=20');
    for (const key of ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies']) assert.equal(pkg[key], undefined, `no ${key}`);
    assert.equal(pkg.version, api.VERSION);
  });
});
