// Finding the agentrpc server binary, in the same order as the Python client:
// an explicit `binary`, `$AGENTRPC_BIN`, the binary the npm package carries
// (`bin/agentrpc` beside `src/`, see scripts/package), `agentrpc` on PATH, then
// a SwiftPM build (`.build/debug`, then `.build/release`) in this package's
// directory or any directory above it, so a checkout of the repository works
// without installing anything. When nothing fits, the error lists every place
// looked at.

import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BinaryNotFoundError } from './errors-base.js';

/** The environment variable naming the server binary. */
export const ENV_VAR = 'AGENTRPC_BIN';
/** The executable's name on PATH and in `.build`. */
export const BINARY_NAME = 'agentrpc';
/** Where the npm package puts the server: `bin/` of this package. A checkout has none. */
export const PACKAGED_BINARY = fileURLToPath(new URL(`../bin/${BINARY_NAME}`, import.meta.url));

function isExecutableFile(path) {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name, pathVariable) {
  for (const dir of (pathVariable ?? '').split(delimiter)) {
    if (dir && isExecutableFile(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/**
 * `.build/{debug,release}/agentrpc` in `start` and each directory above it.
 * @param {string} [start] defaults to this package's directory
 */
export function repoBuildCandidates(start = dirname(fileURLToPath(import.meta.url))) {
  const candidates = [];
  let dir = resolve(start);
  for (;;) {
    for (const config of ['debug', 'release']) candidates.push(join(dir, '.build', config, BINARY_NAME));
    const parent = dirname(dir);
    if (parent === dir) return candidates;
    dir = parent;
  }
}

/**
 * The path of the server binary, or a BinaryNotFoundError listing every place
 * tried. An explicit `binary` or `$AGENTRPC_BIN` that does not exist is an
 * error, not a fall-through to another binary: the caller asked for that one.
 * @param {string} [binary] a path (anything with a separator) or a name on PATH
 * @param {{env?: NodeJS.ProcessEnv, start?: string, packaged?: string | null}} [options]
 *   `packaged`: the package's own binary (null skips it; for tests)
 * @returns {string}
 */
export function findBinary(binary, { env = process.env, start, packaged = PACKAGED_BINARY } = {}) {
  const searched = [];
  const explicit = (value, label) => {
    if (value.includes(sep) || value.includes('/')) {
      searched.push(`${label}: ${value}`);
      if (isExecutableFile(value)) return value;
    } else {
      searched.push(`${label}: ${JSON.stringify(value)} on PATH`);
      const found = onPath(value, env.PATH);
      if (found) return found;
    }
    throw new BinaryNotFoundError(searched);
  };
  if (binary !== undefined && binary !== null) return explicit(String(binary), 'binary option');
  const fromEnv = env[ENV_VAR];
  if (fromEnv) return explicit(fromEnv, `$${ENV_VAR}`);
  searched.push(`$${ENV_VAR}: not set`);
  if (packaged) {
    searched.push(`${packaged} (the npm package's binary)`);
    if (isExecutableFile(packaged)) return packaged;
  }
  searched.push(`${JSON.stringify(BINARY_NAME)} on PATH`);
  const found = onPath(BINARY_NAME, env.PATH);
  if (found) return found;
  for (const candidate of repoBuildCandidates(start)) {
    searched.push(candidate);
    if (isExecutableFile(candidate)) return candidate;
  }
  throw new BinaryNotFoundError(searched);
}
