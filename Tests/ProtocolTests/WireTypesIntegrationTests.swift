import Testing
@testable import AgentRPCProtocol

private func refs(_ v: JSONValue, into out: inout Set<String>) {
    switch v {
    case .object(let o):
        if let r = o["$ref"]?.stringValue { out.insert(r) }
        for (_, x) in o { refs(x, into: &out) }
    case .array(let a): for x in a { refs(x, into: &out) }
    default: break
    }
}

/// Checks the wire types against JSONValueDecoder (strict) and JSONSchemaGenerator.
@Suite struct WireTypesIntegrationTests {
    @Test func schemasResolve() throws {
        var defs: [(name: String, type: any Decodable.Type)] = []
        func add<M: RPCMethod>(_ m: M.Type) {
            defs.append((m.name + ".params", M.Params.self))
            defs.append((m.name + ".result", M.Result.self))
        }
        func addN<N: RPCNotification>(_ n: N.Type) { defs.append((n.name + ".notification", N.Params.self)) }
        for m in MethodRegistry.requests { add(m) }
        for n in MethodRegistry.notifications { addN(n) }
        defs.append(("ErrorObject", ErrorObject.self))
        for d in defs {
            do {
                let doc = try JSONSchemaGenerator.schema(for: d.type)
                var found: Set<String> = []
                refs(doc, into: &found)
                let names = Set((doc["$defs"]?.objectValue ?? [:]).keys.map { "#/$defs/" + $0 })
                #expect(found.subtracting(names).isEmpty, "\(d.name): unresolved \(found.subtracting(names))")
            } catch {
                Issue.record("\(d.name): \(error)")
            }
        }
    }

    @Test func strictDecoderTakesBigConfig() throws {
        var dec = JSONValueDecoder()
        dec.rejectUnknownKeys = true
        let v = try JSONValue.parse(WireTypesTests.threeModes)
        let config = try dec.decode(SessionConfig.self, from: v)
        #expect(config.validate() == [])
        let back = try JSONValueEncoder().encode(config)
        #expect(try dec.decode(SessionConfig.self, from: back) == config)
        // unknown keys inside unions
        for bad: JSONValue in [
            ["tools": [["name": "a", "bogus": 1]]],
            ["profiles": ["cases": ["a": ["tools": [["skills": [], "name": "x"]]]]]],
            ["profiles": ["cases": ["a": ["instructions": [["text": "x", "extra": 1]]]]]],
            ["profiles": ["cases": ["a": ["hooks": ["onPrompt": [["set": [:], "wen": ["tool": "x"]]]]]]]],
            ["profiles": ["cases": ["a": ["history": [["rollingWindow": ["entries": 1, "foo": 2]]]]]]],
        ] {
            #expect(throws: JSONDecodingFailure.self) { try dec.decode(SessionConfig.self, from: bad) }
        }
        #expect(throws: JSONDecodingFailure.self) { try dec.decode(TranscriptEntry.self, from: ["id": "a", "type": "prompt", "text": "x", "calls": []]) }
        #expect(throws: JSONDecodingFailure.self) { try dec.decode(TurnInput.self, from: ["text": "x", "images": [["path": "a", "mimeType": "b"]]]) }
        let op = try dec.decode(TranscriptOperation.self, from: ["op": "truncateAfter", "id": nil])
        #expect(op == .truncateAfter(id: nil))
        let ev = try dec.decode(SessionEventParams.self, from: ["sessionId": "s", "seq": 1, "event": ["type": "turnEnded", "status": "failed", "undo": "none", "error": ["code": -32050, "message": "m", "data": ["kind": "providerError", "provider": ["code": "network"]]]]])
        #expect(ev.seq == 1)
        #expect(try JSONValueEncoder().encode(ev) == ev.json)
    }
}
