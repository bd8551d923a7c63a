// Declarations of errors-base.js (hand-written).
import type { ErrorData, ErrorKind, RetryGuidance, ProviderErrorInfo } from './generated/wire.js';

export declare class AgentRPCException extends Error {}

export declare class AgentRPCError extends AgentRPCException {
  static readonly kind: ErrorKind | undefined;
  static readonly code: number | undefined;
  constructor(code: number, message: string, data?: Record<string, unknown>);
  code: number;
  data: Partial<ErrorData> & Record<string, unknown>;
  readonly kind: string | undefined;
  readonly turnId: string | undefined;
  readonly partialText: string | undefined;
  toJSON(): { code: number; message: string; data: Record<string, unknown> };
}

export declare class RunLimitExceededError extends AgentRPCError {
  readonly limit: number | undefined;
}

export declare class ProviderErrorBase extends AgentRPCError {
  readonly provider: Partial<ProviderErrorInfo>;
  readonly providerCode: ProviderErrorInfo['code'] | undefined;
  readonly httpStatus: number | undefined;
  readonly retryGuidance: RetryGuidance;
  readonly isRetryable: boolean;
  readonly requiresUserAction: boolean;
  readonly safeDescription: string | undefined;
}

export declare class ToolExecutorErrorBase extends AgentRPCError {
  readonly callId: string | undefined;
  readonly toolName: string | undefined;
  readonly clientError: AgentRPCError | undefined;
  /** What the client-side tool function threw, when it was one of this client's. */
  cause?: unknown;
}

/**
 * An error class errorFromWire can choose: AgentRPCError or a subclass with its
 * static `kind` and `code`. The generated classes take `(message, data)`,
 * AgentRPCError `(code, message, data)`, hence the open constructor.
 */
export interface ErrorClass {
  readonly kind: string | undefined;
  readonly code: number | undefined;
  readonly prototype: AgentRPCError;
  new (...args: any[]): AgentRPCError;
}

/** Makes classes known to errorFromWire by their static kind and code (ERROR_CLASSES are, from the start). */
export declare function registerErrorClasses(classes: readonly ErrorClass[]): void;
/** The class for an error: by kind, else by code, else AgentRPCError. */
export declare function errorClassFor(code: number, kind?: string): ErrorClass;
export declare function errorFromWire(error: unknown): AgentRPCError;

export declare class ClientError extends AgentRPCException {}

export declare class ConnectionClosedError extends ClientError {
  constructor(message: string, info?: { exitCode?: number | null; signal?: string | null; stderrTail?: string });
  readonly reason: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly stderrTail: string;
}

export declare class ServerExitedError extends ConnectionClosedError {}

export declare class RequestTimeoutError extends ClientError {
  constructor(method: string, timeoutMs: number, requestId: number | string);
  readonly method: string;
  readonly timeoutMs: number;
  readonly requestId: number | string;
}

export declare class BinaryNotFoundError extends ClientError {
  constructor(searched: string[]);
  readonly searched: string[];
}
