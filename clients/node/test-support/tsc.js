// Where the TypeScript compiler is, for the tests that use it (Debian's
// node-typescript puts `tsc` on PATH and the `typescript` module under
// /usr/share/nodejs). The client itself never needs it.

import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, join } from 'node:path';

/** The path of `tsc` on PATH, or null. */
export function findTsc() {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, 'tsc');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return null;
}

/** The `typescript` module (the compiler API), or null when it is not installed. */
export function loadTypeScript() {
  const require = createRequire(import.meta.url);
  for (const id of ['typescript', '/usr/share/nodejs/typescript']) {
    try {
      return require(id);
    } catch {
      // try the next place
    }
  }
  return null;
}
