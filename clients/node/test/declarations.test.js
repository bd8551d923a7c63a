// The declarations stay in step with the JavaScript: for every src/*.js that
// has a .d.ts beside it, the names the module exports at run time are exactly
// the values its declarations export (a class, function or const), each of the
// right sort; and every declared class has the members the JavaScript defines,
// and defines the members it declares. The declarations are read with the
// TypeScript compiler API (Debian's node-typescript), so `export *` chains and
// inherited members are followed as tsc follows them.
//
// scripts/test installs the compiler and sets AGENTRPC_REQUIRE_TSC=1, so there
// a missing compiler fails instead of skipping.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { REPO } from '../test-support/helpers.js';
import { loadTypeScript } from '../test-support/tsc.js';

const SRC = join(REPO, 'clients', 'node', 'src');
const ts = loadTypeScript();

/** Every src/**\/*.js with a .d.ts beside it. */
function declaredModules(dir = SRC) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...declaredModules(path));
    else if (entry.name.endsWith('.js') && readdirSync(dir).includes(entry.name.replace(/\.js$/, '.d.ts'))) found.push(path);
  }
  return found.sort();
}

/** Every JavaScript source of the client, to find fields assigned in constructors. */
function allSources(dir = SRC) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return allSources(path);
    return entry.name.endsWith('.js') ? [readFileSync(path, 'utf8')] : [];
  }).join('\n');
}

const isOurs = (symbol) => (symbol.declarations ?? []).some((d) => d.getSourceFile().fileName.startsWith(SRC));
/** `__@asyncDispose@12` (a member keyed by a well-known symbol) → `Symbol.asyncDispose`. */
const memberName = (symbol) => {
  const m = /^__@(\w+)@\d+$/.exec(symbol.escapedName);
  return m ? `Symbol.${m[1]}` : symbol.name;
};
const runtimeKey = (name) => (name.startsWith('Symbol.') ? Symbol[name.slice('Symbol.'.length)] : name);

describe('the declarations match what src/*.js exports', { skip: ts ? false : 'the TypeScript compiler API is not installed (apt-get install node-typescript)' }, () => {
  const modules = declaredModules();
  const program = ts.createProgram(modules.map((m) => m.replace(/\.js$/, '.d.ts')), {
    strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], types: [],
  });
  const checker = program.getTypeChecker();
  const sources = allSources();

  test('the declarations themselves have no errors', () => {
    const diagnostics = ts.getPreEmitDiagnostics(program);
    assert.deepEqual(diagnostics.map((d) => ts.formatDiagnostic(d, {
      getCanonicalFileName: (f) => f, getCurrentDirectory: () => REPO, getNewLine: () => '\n',
    })), []);
  });

  test('the modules checked include index, errors and the generated ones', () => {
    const names = modules.map((m) => relative(SRC, m));
    for (const name of ['index.js', 'errors.js', 'errors-base.js', 'generated/errors.js', 'generated/protocol.js']) {
      assert.ok(names.includes(name), `${name} has a .d.ts`);
    }
  });

  for (const path of modules) {
    const name = relative(SRC, path);
    test(`${name}: every export is declared, every declared value exists, classes have their declared members`, async () => {
      const runtime = await import(pathToFileURL(path).href);
      const file = program.getSourceFile(path.replace(/\.js$/, '.d.ts'));
      const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(file));
      const values = new Map();
      for (const exported of exports) {
        const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        if (symbol.flags & ts.SymbolFlags.Value) values.set(exported.name, symbol);
      }
      const undeclared = Object.keys(runtime).filter((n) => !values.has(n));
      const missing = [...values.keys()].filter((n) => !(n in runtime));
      assert.deepEqual({ undeclared, missing }, { undeclared: [], missing: [] },
        `${name}: exported but not declared: [${undeclared.join(', ')}]; declared but not exported: [${missing.join(', ')}]`);

      for (const [exportName, symbol] of values) {
        const value = runtime[exportName];
        if (symbol.flags & ts.SymbolFlags.Class) {
          assert.equal(typeof value, 'function', `${exportName} is declared a class`);
          checkClass(exportName, symbol, value);
        } else if (symbol.flags & ts.SymbolFlags.Function) {
          assert.equal(typeof value, 'function', `${exportName} is declared a function`);
        } else {
          assert.notEqual(value, undefined, `${exportName} is declared a const`);
          if (value && typeof value === 'object' && !Array.isArray(value)) checkObject(exportName, symbol, value);
        }
      }
    });
  }

  /** An object const (such as `ops`): its functions are declared, its declared functions exist. */
  function checkObject(constName, symbol, object) {
    const declared = new Map(checker.getPropertiesOfType(checker.getTypeOfSymbolAtLocation(symbol, symbol.valueDeclaration))
      .map((p) => [p.name, p]));
    for (const key of Object.keys(object)) assert.ok(declared.has(key), `${constName}.${key} is defined but not declared`);
    for (const [key, property] of declared) {
      const callable = checker.getTypeOfSymbolAtLocation(property, symbol.valueDeclaration).getCallSignatures().length > 0;
      if (callable) assert.equal(typeof object[key], 'function', `${constName}.${key} is declared a function`);
    }
  }

  /** Both sides of a class: declared members exist, defined members are declared. */
  function checkClass(className, symbol, cls) {
    const instanceType = checker.getDeclaredTypeOfSymbol(symbol);
    const staticType = checker.getTypeOfSymbolAtLocation(symbol, symbol.valueDeclaration);
    const declaredInstance = new Map(checker.getPropertiesOfType(instanceType).map((p) => [memberName(p), p]));
    const declaredStatic = new Map(checker.getPropertiesOfType(staticType).filter((p) => p.name !== 'prototype').map((p) => [memberName(p), p]));

    for (const [member, property] of declaredInstance) {
      if (!isOurs(property)) continue; // Error's own members
      const key = runtimeKey(member);
      if (property.flags & ts.SymbolFlags.Method) {
        assert.equal(typeof cls.prototype[key], 'function', `${className}.prototype.${member} is declared a method`);
      } else if (!(key in cls.prototype)) {
        // A field: assigned in a constructor, declared in a class body, or defined on an instance.
        const field = new RegExp(`this\\.${member}\\s*=|^\\s+${member}(?:\\s*=|;)|defineProperty\\(\\w+, '${member}'`, 'm');
        assert.ok(field.test(sources), `${className}.${member} is declared; nothing defines it`);
      }
    }
    for (const member of declaredStatic.keys()) {
      assert.ok(runtimeKey(member) in cls, `static ${className}.${member} is declared; the class has none`);
    }

    // What the JavaScript defines (own members of each class in the chain) is declared.
    for (let proto = cls.prototype; proto && proto !== Object.prototype && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
      for (const key of Reflect.ownKeys(proto)) {
        if (key === 'constructor' || (typeof key === 'string' && key.startsWith('_'))) continue;
        const member = typeof key === 'symbol' ? `Symbol.${Object.getOwnPropertyNames(Symbol).find((n) => Symbol[n] === key)}` : key;
        assert.ok(declaredInstance.has(member), `${className}: ${member} is defined but not declared`);
      }
    }
    for (const key of Object.getOwnPropertyNames(cls)) {
      if (['length', 'name', 'prototype'].includes(key)) continue;
      assert.ok(declaredStatic.has(key), `${className}: static ${key} is defined but not declared`);
    }
  }
});

if (!ts && process.env.AGENTRPC_REQUIRE_TSC === '1') {
  test('the TypeScript compiler API is there (scripts/test requires it)', () => {
    assert.fail('AGENTRPC_REQUIRE_TSC=1 but the typescript module cannot be loaded');
  });
}
