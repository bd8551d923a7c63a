import Testing

@testable import AgentRPCProtocol

/// `session/send` params of the common shape are read without the `Codable`
/// decoder; every other shape is left to it. Read directly, they must equal
/// what the decoder makes of them, and the reader must take nothing else.
@Suite struct SessionSendDirectReadingTests {
    static let taken: [String] = [
        #"{"sessionId":"s-1","input":"go"}"#,
        #"{"input":"","sessionId":""}"#,
        #"{"sessionId":"s","input":"é \ud83d\ude00 \n","queue":true}"#,
        #"{"sessionId":"s","input":"go","queue":false}"#,
    ]

    static let others: [String] = [
        #"{"sessionId":"s","input":{"text":"go"}}"#,
        #"{"sessionId":"s","input":{"text":"go","images":[{"url":"https://x/y.png"}]}}"#,
        #"{"sessionId":"s","input":"go","options":{"maxRoundTrips":2}}"#,
        #"{"sessionId":"s","input":"go","queue":null}"#,
        #"{"sessionId":"s","input":"go","queue":1}"#,
        #"{"sessionId":"s","input":"go","extra":1}"#,
        #"{"sessionId":"s","input":"go","queue":true,"extra":1}"#,
        #"{"sessionId":1,"input":"go"}"#,
        #"{"sessionId":"s","input":1}"#,
        #"{"sessionId":"s","input":null}"#,
        #"{"sessionId":"s"}"#,
        #"{"input":"go"}"#,
        #"{"sessionId":"s","queue":true}"#,
        #"{}"#, #"[]"#, #""s""#, #"null"#,
    ]

    @Test func readsOnlyTheCommonShapeAndAsTheDecoderDoes() throws {
        for text in Self.taken {
            let value = try JSONValue.parse(text)
            let direct = SessionSendParams(directly: value)
            #expect(direct != nil, "\(text)")
            #expect(direct == (try value.decode(as: SessionSendParams.self)), "\(text)")
            #expect(direct == (try value.decode(as: SessionSendParams.self, rejectUnknownKeys: true)), "\(text)")
        }
        for text in Self.others {
            #expect(SessionSendParams(directly: try JSONValue.parse(text)) == nil, "\(text)")
        }
    }

    /// The method picks the reader where it is declared (no cast per call): `session/send`
    /// reads its params directly, a method whose params cannot be read so decodes them.
    @Test func theMethodPicksTheReaderStatically() throws {
        let value = try JSONValue.parse(Self.taken[0])
        #expect(SessionSendRequest.directlyRead(value) == SessionSendParams(directly: value))
        #expect(SessionSendRequest.directlyRead(value) != nil)
        #expect(SessionCreateRequest.directlyRead(try JSONValue.parse("{}")) == nil)
    }
}
