import AgentRPCProtocol

/// The OTLP/JSON encoding of spans (opentelemetry-proto, JSON mapping of
/// `ExportTraceServiceRequest`): ids as lowercase hex, 64-bit integers — times
/// and `intValue` attributes — as decimal strings, enums as numbers, and
/// lowerCamelCase field names.
enum OTLPJSON {
    /// `service.name` on the resource and the instrumentation scope name.
    static let serviceName = "agentrpc"

    /// One `ExportTraceServiceRequest` holding `spans` under a single resource and scope.
    static func exportRequest(spans: [FinishedSpan], scopeVersion: String) -> JSONValue {
        let resource: JSONValue = ["attributes": [attribute("service.name", .string(serviceName))]]
        let scope: JSONValue = ["name": .string(serviceName), "version": .string(scopeVersion)]
        return [
            "resourceSpans": [
                [
                    "resource": resource,
                    "scopeSpans": [["scope": scope, "spans": .array(spans.map(\.otlpJSON))]],
                ]
            ]
        ]
    }

    /// An OTLP `KeyValue`.
    static func attribute(_ key: String, _ value: SpanValue) -> JSONValue {
        ["key": .string(key), "value": anyValue(value)]
    }

    /// An OTLP `AnyValue` holding a scalar.
    static func anyValue(_ value: SpanValue) -> JSONValue {
        switch value {
        case .string(let s): return ["stringValue": .string(s)]
        case .int(let i): return ["intValue": .string(String(i))]
        case .bool(let b): return ["boolValue": .bool(b)]
        case .double(let d):
            // The protobuf JSON mapping spells non-finite doubles as strings;
            // a bare number would have to be `null`, which is not a double.
            if d.isNaN { return ["doubleValue": "NaN"] }
            if d.isInfinite { return ["doubleValue": .string(d < 0 ? "-Infinity" : "Infinity")] }
            return ["doubleValue": .double(d)]
        }
    }
}

extension FinishedSpan {
    /// The OTLP/JSON `Span` object: the `span` of a `trace/span` notification and
    /// the element of `spans` in a trace-file line. Attributes are sorted by key.
    var otlpJSON: JSONValue {
        var object: [String: JSONValue] = [
            "traceId": .string(context.traceID.hex),
            "spanId": .string(context.spanID.hex),
            "name": .string(name),
            "kind": .int(kind.rawValue),
            "startTimeUnixNano": .string(String(startTimeUnixNano)),
            "endTimeUnixNano": .string(String(endTimeUnixNano)),
            "attributes": .array(attributes.sorted { $0.key < $1.key }.map { OTLPJSON.attribute($0.key, $0.value) }),
        ]
        if let parentSpanID { object["parentSpanId"] = .string(parentSpanID.hex) }
        var statusObject: [String: JSONValue] = ["code": .int(status.code)]
        if case .error(let message?) = status { statusObject["message"] = .string(message) }
        object["status"] = .object(statusObject)
        return .object(object)
    }
}
