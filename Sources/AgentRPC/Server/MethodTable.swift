import AgentRPCProtocol

/// What a handler hands back to the dispatcher.
package enum Reply<Result: Sendable>: Sendable {
    /// Answered within the dispatch step: later requests see its effects.
    case now(Result)
    /// Long-running work (a turn): its ordered prefix already ran; the rest runs
    /// as its own task, cancellable with `$/cancelRequest`.
    case later(@Sendable () async throws -> Result)
}

/// Everything a handler may need about the request it is serving.
struct RequestContext: Sendable {
    /// Nil for notifications.
    let requestID: RequestID?
    let method: String
}

/// The handler registry: one entry per method name, registered with its typed
/// `RPCMethod` description so params are decoded and results encoded in one place.
final class MethodTable: Sendable {
    typealias ErasedHandler = @Sendable (JSONValue?, RequestContext) async throws -> Reply<JSONValue>
    typealias ErasedNotificationHandler = @Sendable (JSONValue?) async -> Void

    private let handlers: [String: ErasedHandler]
    private let notificationHandlers: [String: ErasedNotificationHandler]
    /// Names given a handler more than once (the last one wins); must be empty (a test checks).
    let registeredTwice: [String]

    init(handlers: [String: ErasedHandler], notificationHandlers: [String: ErasedNotificationHandler], registeredTwice: [String] = []) {
        self.handlers = handlers
        self.notificationHandlers = notificationHandlers
        self.registeredTwice = registeredTwice
    }

    func handler(for method: String) -> ErasedHandler? { handlers[method] }
    func notificationHandler(for method: String) -> ErasedNotificationHandler? { notificationHandlers[method] }
    var methodNames: [String] { handlers.keys.sorted() }
    var notificationNames: [String] { notificationHandlers.keys.sorted() }

    /// Builds the table; registering a name twice is a programming error caught by tests.
    struct Builder {
        var handlers: [String: ErasedHandler] = [:]
        var notificationHandlers: [String: ErasedNotificationHandler] = [:]
        private(set) var duplicates: [String] = []

        mutating func on<M: RPCMethod>(
            _ method: M.Type, strictKeys: Bool = false, errorKind: ErrorKind = .invalidParams,
            _ body: @escaping @Sendable (M.Params, RequestContext) async throws -> Reply<M.Result>
        ) {
            on(method, strictKeys: strictKeys, errorKindForField: { _ in errorKind }, body)
        }

        /// Like `on(_:strictKeys:errorKind:_:)`, with the error kind of a params
        /// decoding failure chosen by the offending field's path (e.g. a bad
        /// transcript entry is `invalidTranscript`, a bad session id `invalidParams`).
        mutating func on<M: RPCMethod>(
            _ method: M.Type, strictKeys: Bool = false, errorKindForField: @escaping @Sendable (String) -> ErrorKind,
            _ body: @escaping @Sendable (M.Params, RequestContext) async throws -> Reply<M.Result>
        ) {
            if handlers[M.name] != nil { duplicates.append(M.name) }
            handlers[M.name] = { raw, context in
                let params: M.Params = try decodeParams(raw, as: M.Params.self, strictKeys: strictKeys, directly: M.directlyRead, errorKindForField: errorKindForField)
                switch try await body(params, context) {
                case .now(let result):
                    return .now(try encodeResult(result))
                case .later(let work):
                    return .later { try encodeResult(try await work()) }
                }
            }
        }

        mutating func onNotification<N: RPCNotification>(_ notification: N.Type, _ body: @escaping @Sendable (N.Params) async -> Void) {
            if notificationHandlers[N.name] != nil { duplicates.append(N.name) }
            notificationHandlers[N.name] = { raw in
                // A notification cannot be answered; ill-typed ones are dropped.
                guard let params = try? decodeParams(raw, as: N.Params.self, strictKeys: false, errorKindForField: { _ in .invalidParams }) else { return }
                await body(params)
            }
        }

        func build() -> MethodTable { MethodTable(handlers: handlers, notificationHandlers: notificationHandlers, registeredTwice: duplicates) }
    }
}

/// Decodes params, naming the offending field in the error (`data.field`).
/// `directly` reads the common shapes without the decoder (`RPCMethod.directlyRead`).
func decodeParams<T: Decodable>(
    _ raw: JSONValue?, as type: T.Type, strictKeys: Bool, directly: (JSONValue) -> T? = { _ in nil }, errorKindForField: (String) -> ErrorKind
) throws -> T {
    let value = raw ?? .object([:])
    if case .array = value {
        throw RPCError(errorKindForField(""), "params must be an object (by-name), not an array")
    }
    // Only known members are read directly, so `strictKeys` cannot matter.
    if let params = directly(value) { return params }
    do {
        return try value.decode(as: T.self, rejectUnknownKeys: strictKeys)
    } catch {
        let failure = error
        let field = failure.path
        let message = field.isEmpty ? failure.message : "\(field): \(failure.message)"
        throw RPCError(errorKindForField(field), message, data: field.isEmpty ? [:] : ["field": .string(field)])
    }
}

func encodeResult<T: Encodable>(_ value: T) throws -> JSONValue {
    // A result that builds its own value (`TurnResult`, every turn) skips the
    // encoder's chain of casts to the standard types, none of which is one.
    if let direct = value as? any JSONValueRepresentable { return direct.json }
    do {
        return try JSONValue(encoding: value)
    } catch {
        throw RPCError.internalError("could not encode the result: \(error)")
    }
}
