export * from './errors-base.js';
export * from './generated/errors.js';
