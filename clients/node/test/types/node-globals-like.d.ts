// Stands in for @types/node (not installable here: no npm registry) in the
// shape its globals take, written for this test: a global AbortSignal interface
// and a `var AbortSignal` that defers to the dom lib's when both are loaded,
// and the disposal symbols and interfaces it declares for older libs. Checked
// by tsconfig.node-types.json: the client's declarations must merge with these
// and hand out this AbortSignal.

interface NodeLikeEventTarget {
  addEventListener(type: string, listener: (event: unknown) => unknown, options?: boolean | { once?: boolean }): void;
  removeEventListener(type: string, listener: (event: unknown) => unknown): void;
}

declare global {
  interface AbortSignal extends NodeLikeEventTarget {
    readonly aborted: boolean;
    readonly reason: any;
    throwIfAborted(): void;
  }
  interface AbortController {
    readonly signal: AbortSignal;
    abort(reason?: any): void;
  }
  var AbortSignal: typeof globalThis extends { onmessage: any; AbortSignal: infer T } ? T
    : { prototype: AbortSignal; new (): AbortSignal; abort(reason?: any): AbortSignal };
  var AbortController: typeof globalThis extends { onmessage: any; AbortController: infer T } ? T
    : { prototype: AbortController; new (): AbortController };

  interface SymbolConstructor {
    readonly dispose: unique symbol;
    readonly asyncDispose: unique symbol;
  }
  interface Disposable {
    [Symbol.dispose](): void;
  }
  interface AsyncDisposable {
    [Symbol.asyncDispose](): PromiseLike<void>;
  }
}

export {};
