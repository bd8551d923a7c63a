// Every error this package throws: the hand-written roots and local failures
// (errors-base.js) and one generated class per wire error kind.

import { registerErrorClasses } from './errors-base.js';
import { ERROR_CLASSES } from './generated/errors.js';

export * from './errors-base.js';
export * from './generated/errors.js';

registerErrorClasses(ERROR_CLASSES);
