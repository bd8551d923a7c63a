// The `session/event` envelope: one value of any payload type listed in
// `SessionEvent.registry` (Methods/Events.swift). Encoding, decoding and the
// JSON Schema of the union are derived from that list and each payload's own
// `Codable` conformance, so an event's fields are written once, in its type.

/// The payload of one kind of session event: its fields, and its wire name,
/// sent as the event's `type` member. List a new payload type in
/// `SessionEvent.registry` and it is encoded, decoded and in the schema.
public protocol SessionEventPayload: Codable, Sendable, Hashable {
    /// The event's `type` member on the wire.
    static var type: String { get }
    /// The whole event object as sent, `type` included. The default encodes the
    /// payload's `Codable` form; events sent at text-delta rate or in every tool
    /// round trip build it directly (EventRegistryTests checks each such form
    /// against `encodedEventJSON`).
    var eventJSON: JSONValue { get }
    /// Writes `eventJSON`'s JSON text (as `serialize(into:)` writes it) into a
    /// stage already open: the event's params are written around it. The
    /// default serializes `eventJSON`; the events of every round trip write it
    /// without building it (EventRegistryTests and JSONStageTests check each
    /// against `eventJSON`).
    func writeEventJSON(into stage: inout JSONStage)
}

extension SessionEventPayload {
    /// The payload type-erased for comparing and hashing events.
    var hashable: AnyHashable { AnyHashable(self) }

    public var eventJSON: JSONValue { encodedEventJSON }

    public func writeEventJSON(into stage: inout JSONStage) { stage.value(eventJSON) }

    /// Appends `eventJSON`'s JSON text.
    public func writeEventJSON(into out: inout [UInt8]) {
        JSONStage.write(into: &out) { writeEventJSON(into: &$0) }
    }

    /// The event object from the payload's `Codable` form: what `eventJSON` is,
    /// unless a payload builds it directly.
    public var encodedEventJSON: JSONValue {
        // The engine builds every payload itself, and the encoder only refuses a
        // non-finite number, which no event field holds; the members would be empty.
        var members = (try? JSONValueEncoder().encode(self))?.objectValue ?? [:]
        members["type"] = .string(Self.type)
        return .object(members)
    }
}

/// One event of a session (docs/protocol.md §4): `{"type": ..., fields}`.
public struct SessionEvent: Codable, Sendable, Hashable, CustomStringConvertible, JSONValueRepresentable {
    /// What happened; one of the types in `registry`.
    public let payload: any SessionEventPayload

    /// Wraps a payload. Its type must be listed in `registry` to be decodable.
    public init(_ payload: some SessionEventPayload) { self.payload = payload }

    /// The event's `type` member.
    public var type: String { Swift.type(of: payload).type }

    /// The payload as `P`, or nil if the event is of another kind.
    public func payload<P: SessionEventPayload>(as _: P.Type) -> P? { payload as? P }

    /// The wire form (hot path: text deltas build it without an encoder).
    public var json: JSONValue { payload.eventJSON }

    public var description: String { "SessionEvent(\(payload))" }

    public static func == (a: SessionEvent, b: SessionEvent) -> Bool { a.payload.hashable == b.payload.hashable }

    public func hash(into hasher: inout Hasher) { hasher.combine(payload.hashable) }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    private enum TypeKey: String, CodingKey { case type }

    /// Clients and tests read events back; the server never decodes them.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: TypeKey.self)
        let type = try c.decode(String.self, forKey: .type)
        guard let payloadType = Self.payloadTypes[type] else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown event type '\(type)'")
        }
        self.payload = try payloadType.init(from: decoder)
    }

    /// `registry` by wire name.
    private static let payloadTypes: [String: any SessionEventPayload.Type] = {
        var byName: [String: any SessionEventPayload.Type] = [:]
        for payload in registry where byName[payload.type] == nil { byName[payload.type] = payload }
        return byName
    }()

    /// Wire names listed more than once in `registry`; must be empty (a test checks).
    public static func duplicateTypes() -> [String] {
        var seen: Set<String> = []
        var duplicates: [String] = []
        for payload in registry where !seen.insert(payload.type).inserted { duplicates.append(payload.type) }
        return duplicates
    }
}

extension SessionEvent: JSONSchemaTaggedUnion {
    /// The schema is a `oneOf` with one closed object per registered payload.
    public static var tagKey: String { "type" }
    public static var variants: [(tag: String, type: any Decodable.Type)] { registry.map { ($0.type, $0) } }
}
