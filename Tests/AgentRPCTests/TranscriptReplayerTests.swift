import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC
@testable import AgentTools

private func json(_ text: String) -> JSONValue {
    do {
        return try JSONValue.parse(text)
    } catch {
        Issue.record("bad JSON in test: \(error)")
        return .null
    }
}

@Suite struct TranscriptMatcherTests {
    func mismatch(_ pattern: String, _ actual: String, captures: [String: JSONValue] = [:]) -> String? {
        var matcher = TranscriptMatcher(captures: captures)
        return matcher.match(json(pattern), against: json(actual))?.description
    }

    @Test func exactJSONEqualityWithNumbersByValue() {
        #expect(mismatch(#"{"a": 1, "b": [true, null, "x"]}"#, #"{"b": [true, null, "x"], "a": 1.0}"#) == nil)
        #expect(mismatch("1.0", "1") == nil)
        #expect(mismatch("1", "2") == "at $: expected 1, got 2")
        #expect(mismatch("1", #""1""#) == #"at $: expected 1, got "1""#)
        #expect(mismatch("null", "false") == "at $: expected null, got false")
    }

    @Test func diffPathsNameTheFirstDifference() {
        let pattern = #"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"$string","data":{"kind":"parseError"}}}"#
        let actual = #"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad","data":{"kind":"invalidRequest"}}}"#
        #expect(mismatch(pattern, actual) == #"at $.error.data.kind: expected "parseError", got "invalidRequest""#)
        #expect(mismatch(#"{"a":[1,{"b":2}]}"#, #"{"a":[1,{"b":3}]}"#) == "at $.a[1].b: expected 2, got 3")
        #expect(mismatch(#"{"a b":1}"#, #"{"a b":2}"#) == #"at $["a b"]: expected 1, got 2"#)
        #expect(mismatch(#"{"a":1}"#, #"{"a":1,"extra":true}"#) == "at $.extra: unexpected member (value true)")
        #expect(mismatch(#"{"a":1,"b":"$any"}"#, #"{"a":1}"#) == "at $.b: missing (expected any value)")
        #expect(mismatch(#"{"a":[1,2]}"#, #"{"a":[1]}"#) == "at $.a: expected 2 elements, got 1: [1]")
        #expect(mismatch(#"{"a":{}}"#, #"{"a":[]}"#) == "at $.a: expected an object, got []")
    }

    @Test func typePlaceholders() {
        #expect(mismatch(#""$any""#, "null") == nil)
        #expect(mismatch(#""$string""#, #""""#) == nil)
        #expect(mismatch(#""$string""#, "1") == "at $: expected a string, got 1")
        #expect(mismatch(#""$number""#, "1.5") == nil)
        #expect(mismatch(#""$number""#, "3") == nil)
        #expect(mismatch(#""$number""#, #""3""#) == #"at $: expected a number, got "3""#)
        #expect(mismatch(#""$integer""#, "3") == nil)
        #expect(mismatch(#""$integer""#, "3.0") == nil)
        #expect(mismatch(#""$integer""#, "3.5") == "at $: expected an integer, got 3.5")
        #expect(mismatch(#""$bool""#, "false") == nil)
        #expect(mismatch(#""$bool""#, "0") == "at $: expected a boolean, got 0")
        #expect(mismatch(#""$object""#, #"{"x":1}"#) == nil)
        #expect(mismatch(#""$object""#, "[]") == "at $: expected an object, got []")
        #expect(mismatch(#""$array""#, "[1]") == nil)
        #expect(mismatch(#""$array""#, "{}") == "at $: expected an array, got {}")
    }

    @Test func timestampsAndRegexes() {
        #expect(mismatch(#""$timestamp""#, #""2024-05-01T12:00:00Z""#) == nil)
        #expect(mismatch(#""$timestamp""#, #""2024-05-01T12:00:00.123+02:00""#) == nil)
        #expect(mismatch(#""$timestamp""#, #""yesterday""#) == #"at $: expected an ISO-8601 timestamp, got "yesterday""#)
        #expect(mismatch(#""$regex:s-[0-9a-f]+""#, #""s-00ff""#) == nil)
        // The whole string must match, not a substring.
        #expect(mismatch(#""$regex:s-[0-9a-f]+""#, #""xs-00ff""#) == #"at $: expected a string matching /s-[0-9a-f]+/, got "xs-00ff""#)
        #expect(mismatch(#""$regex:.*""#, "1") == "at $: expected a string matching /.*/, got 1")
    }

    @Test func capturesAndRefs() {
        var matcher = TranscriptMatcher()
        #expect(matcher.match(json(#"{"sessionId":"$capture:s"}"#), against: json(#"{"sessionId":"abc"}"#)) == nil)
        #expect(matcher.captures["s"] == "abc")
        #expect(matcher.match(json(#"{"x":"$ref:s"}"#), against: json(#"{"x":"abc"}"#)) == nil)
        #expect(matcher.match(json(#"{"x":"$ref:s"}"#), against: json(#"{"x":"abd"}"#))?.description == #"at $.x: expected $ref:s = "abc", got "abd""#)
        #expect(matcher.match(json(#""$ref:nope""#), against: json("1"))?.description == "at $: $ref:nope is not captured yet (got 1)")
        // A capture made by a failed match is not kept.
        #expect(matcher.match(json(#"{"a":"$capture:t","b":2}"#), against: json(#"{"a":"x","b":3}"#)) != nil)
        #expect(matcher.captures["t"] == nil)
        // Refs compare numbers by value and are substituted into messages to send.
        #expect(matcher.match(json(#"{"id":"$capture:req"}"#), against: json(#"{"id":7}"#)) == nil)
        #expect(matcher.match(json(#""$ref:req""#), against: json("7.0")) == nil)
        let reply = try? matcher.substitute(json(#"{"id":"$ref:req","result":{"s":"$ref:s","lit":"$$ref:s","m":"$/cancelRequest"}}"#))
        #expect(reply == json(#"{"id":7,"result":{"s":"abc","lit":"$ref:s","m":"$/cancelRequest"}}"#))
        #expect(throws: TranscriptPatternError.self) { try matcher.substitute(json(#"{"a":"$any"}"#)) }
        #expect(throws: TranscriptPatternError.self) { try matcher.substitute(json(#"{"a":["$ref:unbound"]}"#)) }
    }

    @Test func partialAndAbsent() {
        #expect(mismatch(#"{"$partial":true,"a":1}"#, #"{"a":1,"b":2}"#) == nil)
        #expect(mismatch(#"{"$partial":true,"a":1}"#, #"{"b":2}"#) == "at $.a: missing (expected 1)")
        // $partial is not inherited by nested objects.
        #expect(mismatch(#"{"$partial":true,"o":{"a":1}}"#, #"{"o":{"a":1,"b":2}}"#) == "at $.o.b: unexpected member (value 2)")
        #expect(mismatch(#"{"a":1,"error":"$absent"}"#, #"{"a":1}"#) == nil)
        #expect(mismatch(#"{"a":1,"error":"$absent"}"#, #"{"a":1,"error":{"code":1}}"#) == #"at $.error: expected no such member, got {"code":1}"#)
        #expect(mismatch(#"{"$partial":true,"error":"$absent"}"#, #"{"a":1}"#) == nil)
    }

    @Test func placeholderSyntax() {
        #expect(TranscriptMatcher.validatePattern(json(#"{"m":"$/cancelRequest","d":"$","e":"$$any"}"#)) == nil)
        #expect(mismatch(#""$$any""#, #""$any""#) == nil)
        #expect(mismatch(#""$$any""#, "1") == #"at $: expected "$any", got 1"#)
        #expect(TranscriptMatcher.validatePattern(json(#"{"a":"$strng"}"#))?.description.contains("unknown placeholder \"$strng\"") == true)
        #expect(TranscriptMatcher.validatePattern(json(#"["$absent"]"#))?.description == "at $[0]: $absent is only allowed as the value of an object member")
        #expect(TranscriptMatcher.validatePattern(json(#"{"a":"$regex:("}"#)) != nil)
        #expect(TranscriptMatcher.validatePattern(json(#"{"$partial":"yes"}"#)) != nil)
    }
}

@Suite struct TranscriptScriptTests {
    @Test func parsesHeaderStepsAndLineNumbers() throws {
        let text = """
            {"transcript": {"description": "d", "args": ["--x", "1"], "env": {"K": "V"}, "framing": "content-length", "timeoutSeconds": 2}}

            {"comment": "hello"}
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "echo"}, "comment": "why"}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": "$any"}, "timeoutSeconds": 0.5}
            {"sendRaw": {"base64": "/w=="}}
            {"expectExit": {"code": 3}}
            """
        let script = try TranscriptScript.parse(text)
        #expect(script.header.args == ["--x", "1"])
        #expect(script.header.env == ["K": "V"])
        #expect(script.header.framing == .contentLength)
        #expect(script.header.timeoutSeconds == 2)
        #expect(script.header.command == "serve")
        #expect(try TranscriptScript.parse(#"{"transcript": {"command": "acp"}}"#).header.command == "acp")
        #expect(script.steps.map(\.line) == [3, 4, 5, 6, 7])
        #expect(script.steps[2].timeoutSeconds == 0.5)
        if case .sendRaw(let bytes) = script.steps[3].kind { #expect(bytes == [0xFF]) } else { Issue.record("sendRaw") }
        if case .expectExit(let code, _) = script.steps[4].kind { #expect(code == 3) } else { Issue.record("expectExit") }
    }

    @Test func reportsBadLines() {
        func error(_ text: String) -> String? {
            do {
                _ = try TranscriptScript.parse(text)
                return nil
            } catch {
                return error.description
            }
        }
        #expect(error("{\"send\": 1}\n{\"expect\": \"$strng\"}")?.hasPrefix("line 2: expect pattern at $: unknown placeholder") == true)
        #expect(error("{\"sned\": {}}") == "line 1: unknown step field \"sned\" (steps: closeStdin, expect, expectBatch, expectExit, expectFile, expectStderr, expectUnordered, reply, send, sendBytes, sendRaw, sendTogether, signal)")
        #expect(error("{\"send\": {}, \"expect\": {}}") == "line 1: one step per line; found expect and send")
        #expect(error("{\"send\": {\"a\": \"$any\"}}")?.contains("only allowed in expectations") == true)
        #expect(error("{\"send\": {}}\n{\"transcript\": {}}") == "line 2: the \"transcript\" header must be the first line")
        #expect(error("not json") != nil)
        #expect(error(#"{"transcript": {"command": "chat"}}"#) == "line 1: \"command\" must be one of acp, serve")
    }
}

@Suite struct TranscriptRecorderTests {
    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var storage: [String] = []
        func append(_ line: String) { lock.withLock { storage.append(line) } }
        var all: [String] { lock.withLock { storage } }
    }

    @Test func recordsTheCommandThatServes() {
        let lines = Lines()
        let recorder = TranscriptRecorder(description: "editor", command: "acp", args: ["--ephemeral"]) { lines.append($0) }
        recorder.clientClosedInput()
        #expect(lines.all.first == #"{"transcript":{"args":["--ephemeral"],"command":"acp","description":"editor"}}"# + "\n")
    }

    @Test func generalizesVolatileValues() {
        let lines = Lines()
        let recorder = TranscriptRecorder(description: "demo", args: ["--flag"]) { lines.append($0) }
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":1,"method":"session/create","params":{}}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-9f","createdAt":"2024-05-01T12:00:00Z"}}"#))
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":2,"method":"session/send","params":{"sessionId":"s-9f","input":"$HOME"}}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","method":"session/event","params":{"sessionId":"s-9f","turnId":"t-1","seq":1,"event":{"type":"entryAppended","entry":{"id":"e-1","type":"prompt","text":"hi"}}}}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","id":0,"method":"tool/call","params":{"sessionId":"s-9f","turnId":"t-1","callId":"c-1","name":"x","arguments":{}}}"#))
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":0,"result":{"outcome":"ok","content":"fine"}}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","id":2,"result":{"turnId":"t-1","message":{"entryId":"e-1","text":"done"}}}"#))
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":3,"method":"session/mutateTranscript","params":{"sessionId":"s-9f","operations":[{"op":"remove","ids":["e-1"]}]}}"#))
        recorder.serverReadMalformed(Array("{oops".utf8))
        recorder.serverSent(json(#"[{"jsonrpc":"2.0","id":4,"result":{}}]"#))
        recorder.clientClosedInput()
        recorder.serverExiting(code: 0)

        let expected = [
            #"{"transcript":{"args":["--flag"],"description":"demo"}}"#,
            #"{"send":{"id":1,"jsonrpc":"2.0","method":"session/create","params":{}}}"#,
            #"{"expect":{"id":1,"jsonrpc":"2.0","result":{"createdAt":"$timestamp","sessionId":"$capture:sessionId1"}}}"#,
            #"{"send":{"id":2,"jsonrpc":"2.0","method":"session/send","params":{"input":"$$HOME","sessionId":"$ref:sessionId1"}}}"#,
            #"{"expect":{"jsonrpc":"2.0","method":"session/event","params":{"event":{"entry":{"id":"$capture:entryId1","text":"hi","type":"prompt"},"type":"entryAppended"},"seq":1,"sessionId":"$ref:sessionId1","turnId":"$capture:turnId1"}}}"#,
            #"{"expect":{"id":"$capture:toolCallRequest1","jsonrpc":"2.0","method":"tool/call","params":{"arguments":{},"callId":"$capture:callId1","name":"x","sessionId":"$ref:sessionId1","turnId":"$ref:turnId1"}}}"#,
            #"{"reply":{"id":"$ref:toolCallRequest1","jsonrpc":"2.0","result":{"content":"fine","outcome":"ok"}}}"#,
            #"{"expect":{"id":2,"jsonrpc":"2.0","result":{"message":{"entryId":"$ref:entryId1","text":"done"},"turnId":"$ref:turnId1"}}}"#,
            #"{"send":{"id":3,"jsonrpc":"2.0","method":"session/mutateTranscript","params":{"operations":[{"ids":["$ref:entryId1"],"op":"remove"}],"sessionId":"$ref:sessionId1"}}}"#,
            #"{"sendRaw":"{oops"}"#,
            #"{"expectBatch":[{"id":4,"jsonrpc":"2.0","result":{}}]}"#,
            #"{"closeStdin":true}"#,
            #"{"expectExit":{"code":0}}"#,
        ].map { $0 + "\n" }
        #expect(lines.all == expected)
        // What the recorder writes must load as a transcript.
        #expect(throws: Never.self) { try TranscriptScript.parse(lines.all.joined()) }
    }

    @Test func camelCasesMethodNames() {
        #expect(TranscriptRecorderState.camelCase("tool/call") == "toolCall")
        #expect(TranscriptRecorderState.camelCase("confirmation/request") == "confirmationRequest")
    }
}

/// A scripted stand-in for the server, so the runner is tested without it.
enum FakeServer {
    static let source = #"""
        #!/usr/bin/env python3
        import sys, json, os, uuid, datetime

        inp, out = sys.stdin.buffer, sys.stdout.buffer
        mode = None
        pending = {}
        next_id = [100]

        def send(obj):
            body = json.dumps(obj).encode()
            out.write(b'Content-Length: %d\r\n\r\n' % len(body) + body if mode == 'cl' else body + b'\n')
            out.flush()

        def read_frame():
            global mode
            while True:
                line = inp.readline()
                if not line:
                    return None
                if mode is None:
                    if not line.strip():
                        continue
                    mode = 'cl' if line.lower().startswith(b'content-length:') else 'nl'
                if mode == 'nl':
                    if line.strip():
                        return line.strip()
                    continue
                length = None
                while line.strip():
                    k, _, v = line.partition(b':')
                    if k.strip().lower() == b'content-length':
                        length = int(v.strip())
                    line = inp.readline()
                if length is not None:
                    return inp.read(length)

        def result(mid, value):
            return {"jsonrpc": "2.0", "id": mid, "result": value}

        while True:
            frame = read_frame()
            if frame is None:
                break
            try:
                msg = json.loads(frame)
            except Exception:
                send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error", "data": {"kind": "parseError"}}})
                continue
            if isinstance(msg, list):
                send([result(m.get("id"), {"echo": m.get("params")}) for m in msg])
                continue
            method, mid, params = msg.get("method"), msg.get("id"), msg.get("params", {})
            if method is None:
                orig = pending.pop(mid, None)
                if orig is not None:
                    send(result(orig, {"clientSaid": msg.get("result")}))
                continue
            if mid is None:
                continue
            if method == "echo":
                send(result(mid, {"echo": params}))
            elif method == "session":
                send(result(mid, {"sessionId": "s-" + uuid.uuid4().hex, "createdAt": datetime.datetime.now(datetime.timezone.utc).isoformat()}))
            elif method == "askClient":
                sid = next_id[0]; next_id[0] += 1
                pending[sid] = mid
                send({"jsonrpc": "2.0", "id": sid, "method": "tool/call",
                      "params": {"sessionId": params.get("sessionId"), "callId": "c-" + uuid.uuid4().hex, "name": "lookup"}})
            elif method == "notifyTwice":
                for seq in (1, 2):
                    send({"jsonrpc": "2.0", "method": "session/event", "params": {"seq": seq}})
                send(result(mid, {}))
            elif method == "log":
                sys.stderr.write(params["text"] + "\n"); sys.stderr.flush()
                send(result(mid, {}))
            elif method == "exit":
                sys.exit(params.get("code", 0))
            elif method == "hang":
                pass
            elif method == "env":
                send(result(mid, {"value": os.environ.get(params["name"])}))
            elif method == "args":
                send(result(mid, {"args": sys.argv[1:]}))
            elif method == "dump":
                # Appends to the file named after --dump: JSON values one per line, or raw text.
                target = sys.argv[sys.argv.index("--dump") + 1]
                def write_lines():
                    with open(target, "a") as f:
                        for line in params.get("lines", []):
                            f.write(json.dumps(line) + "\n")
                        f.write(params.get("raw", ""))
                delay = params.get("afterSeconds")
                if delay:
                    import threading
                    threading.Timer(delay, write_lines).start()
                else:
                    write_lines()
                send(result(mid, {}))
            elif method == "chatty":
                send(result(mid, {}))
                send({"jsonrpc": "2.0", "method": "extra", "params": {"n": 1}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no", "data": {"kind": "methodNotFound"}}})

        sys.stderr.write("fake server: end of input\n"); sys.stderr.flush()
        if os.environ.get("FAKE_IGNORE_EOF"):
            sys.stdin.close()
            import threading
            threading.Event().wait()
        sys.exit(int(os.environ.get("FAKE_EXIT_CODE", "0")))
        """#

    /// Written once per test process into a temporary directory named by the
    /// user and the script's content, so runs reuse one copy instead of
    /// leaving one each; a fresh name and a rename make concurrent runs safe.
    static let path: String = {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in source.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-fake-\(getuid())-\(String(hash, radix: 16))")
        let file = (directory as NSString).appendingPathComponent("fake-server.py")
        if FileManager.default.fileExists(atPath: file) { return file }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let fresh = file + ".\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: fresh, contents: Data(source.utf8), attributes: [.posixPermissions: 0o755])
        rename(fresh, file)
        return file
    }()

    // The default wait is generous: it bounds a step only when the test fails, and a
    // loaded machine (the fake server is a Python script) can take seconds to start.
    static func replay(_ text: String, timeout: Double = 30, name: String = "t.jsonl") async -> TranscriptResult {
        await TranscriptReplayer(executable: path, defaultTimeout: timeout).replay(text: text, name: name)
    }
}

@Suite struct TranscriptReplayerTests {
    @Test func passingTranscriptCoversEveryStepKind() async {
        let text = #"""
            {"transcript": {"description": "everything", "args": ["--max-message-bytes", "256"], "env": {"FAKE_GREETING": "hi"}}}
            {"comment": "plain request/response, numbers by value"}
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"n": 1.0, "s": "$$lit"}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {"echo": {"n": 1, "s": "$$lit"}}}}
            {"send": {"jsonrpc": "2.0", "id": 2, "method": "args"}}
            {"expect": {"jsonrpc": "2.0", "id": 2, "result": {"args": ["serve", "--max-message-bytes", "256"]}}}
            {"send": {"jsonrpc": "2.0", "id": 3, "method": "env", "params": {"name": "FAKE_GREETING"}}}
            {"expect": {"jsonrpc": "2.0", "id": 3, "result": {"value": "hi"}}}
            {"send": {"jsonrpc": "2.0", "id": 4, "method": "session"}}
            {"expect": {"jsonrpc": "2.0", "id": 4, "result": {"sessionId": "$capture:s", "createdAt": "$timestamp"}}}
            {"send": {"jsonrpc": "2.0", "id": 5, "method": "askClient", "params": {"sessionId": "$ref:s"}}}
            {"expect": {"jsonrpc": "2.0", "id": "$capture:req", "method": "tool/call", "params": {"sessionId": "$ref:s", "callId": "$regex:c-[0-9a-f]{32}", "name": "lookup"}}}
            {"reply": {"jsonrpc": "2.0", "id": "$ref:req", "result": {"outcome": "ok", "content": "42"}}}
            {"expect": {"jsonrpc": "2.0", "id": 5, "result": {"clientSaid": {"outcome": "ok", "content": "42"}}}}
            {"send": {"jsonrpc": "2.0", "id": 6, "method": "notifyTwice"}}
            {"expectUnordered": [{"jsonrpc": "2.0", "method": "session/event", "params": {"seq": 2}}, {"jsonrpc": "2.0", "method": "session/event", "params": {"seq": 1}}]}
            {"expect": {"jsonrpc": "2.0", "id": 6, "result": {}, "error": "$absent"}}
            {"send": [{"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"a": 1}}, {"jsonrpc": "2.0", "id": 8, "method": "echo", "params": {"b": 2}}]}
            {"expectBatch": [{"jsonrpc": "2.0", "id": 8, "result": {"echo": {"b": 2}}}, {"jsonrpc": "2.0", "id": 7, "result": {"$partial": true}}]}
            {"sendRaw": "{not json"}
            {"expect": {"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "$string", "data": {"kind": "parseError"}}}}
            {"sendBytes": "{\"jsonrpc\": \"2.0\", \"id\": 9, "}
            {"sendBytes": "\"method\": \"log\", \"params\": {\"text\": \"split frame ok\"}}\n"}
            {"expect": {"jsonrpc": "2.0", "id": 9, "result": {}}}
            {"expectStderr": "split frame o."}
            {"closeStdin": true}
            {"expectStderr": "end of input"}
            {"expectExit": {"code": 0, "withinSeconds": 2}}
            """#
        let result = await FakeServer.replay(text)
        #expect(result.failureReport == nil)
        #expect(result.passed)
        #expect(result.steps == 26)
    }

    @Test func mismatchReportNamesLinePathAndStderr() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "log", "params": {"text": "about to fail"}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"sendRaw": "nope"}
            {"expect": {"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "$string", "data": {"kind": "invalidRequest"}}}}
            {"send": {"jsonrpc": "2.0", "id": 2, "method": "echo"}}
            """#
        let result = await FakeServer.replay(text, name: "dir/case.jsonl")
        let report = result.failureReport ?? ""
        #expect(!result.passed)
        #expect(result.steps == 4)
        #expect(report.hasPrefix(#"dir/case.jsonl:4: expect: at $.error.data.kind: expected "invalidRequest", got "parseError""#))
        #expect(report.contains("  expected:\n    {\n      \"error\": {"))
        #expect(report.contains("  actual:\n"))
        #expect(report.contains("    | about to fail"))
    }

    @Test func silenceTimesOutAndIsReported() async {
        let text = #"""
            {"transcript": {"timeoutSeconds": 0.3}}
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "hang"}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            """#
        // The report names the 0.3 s limit that fired, which is what bounds the wait;
        // no elapsed-time assertion, which fails on a loaded machine.
        let result = await FakeServer.replay(text)
        #expect(result.failureReport?.hasPrefix("t.jsonl:3: no message from the server within 0.3 s") == true)
    }

    @Test func missingExecutableIsReported() async {
        let result = await TranscriptReplayer(executable: "/nonexistent/agentrpc").replay(text: #"{"send": {}}"#, name: "t.jsonl")
        #expect(result.failureReport?.hasPrefix("t.jsonl: cannot start /nonexistent/agentrpc") == true)
    }

    @Test func unreadableFileIsReported() async {
        let result = await TranscriptReplayer(executable: FakeServer.path).replay(fileAt: "/nonexistent/t.jsonl")
        #expect(result.failureReport?.hasPrefix("/nonexistent/t.jsonl: cannot read the transcript") == true)
    }

    @Test func extraMessagesAtTheEndFail() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "chatty"}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            """#
        let report = await FakeServer.replay(text).failureReport ?? ""
        #expect(report.hasPrefix("t.jsonl: unexpected message at the end of the transcript (1)"))
        #expect(report.contains(#""method": "extra""#))
    }

    @Test func extraMessagesBeforeExpectedExitFail() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "chatty"}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"closeStdin": true}
            {"expectExit": {"code": 0}}
            """#
        let report = await FakeServer.replay(text).failureReport ?? ""
        #expect(report.hasPrefix("t.jsonl:4: the server wrote 1 unexpected message before exiting"))
    }

    @Test func exitCodesAreChecked() async {
        let explicit = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "exit", "params": {"code": 3}}}
            {"expectExit": {"code": 3, "withinSeconds": 20}}
            """#
        #expect(await FakeServer.replay(explicit).failureReport == nil)
        let wrong = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "exit", "params": {"code": 3}}}
            {"expectExit": {"code": 0}}
            """#
        #expect(await FakeServer.replay(wrong).failureReport?.hasPrefix("t.jsonl:2: the server exited with code 3, expected 0") == true)
        let atEnd = #"""
            {"transcript": {"env": {"FAKE_EXIT_CODE": "4"}}}
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "echo"}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {"echo": {}}}}
            """#
        #expect(await FakeServer.replay(atEnd).failureReport?.hasPrefix("t.jsonl: the server exited with code 4 after its stdin closed") == true)
    }

    @Test func aServerThatIgnoresEndOfInputIsKilled() async {
        let text = #"""
            {"transcript": {"env": {"FAKE_IGNORE_EOF": "1"}}}
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "echo"}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {"echo": {}}}}
            """#
        let report = await FakeServer.replay(text).failureReport ?? ""
        #expect(report.hasPrefix("t.jsonl: the server did not exit within 2 s after the transcript closed its stdin (killed)"))
        #expect(report.contains("| fake server: end of input"))
    }

    @Test func contentLengthFraming() async {
        let text = #"""
            {"transcript": {"framing": "content-length"}}
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"x": "a\nb"}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {"echo": {"x": "a\nb"}}}}
            {"sendRaw": "{bad"}
            {"expect": {"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "$string", "data": {"kind": "parseError"}}}}
            """#
        #expect(await FakeServer.replay(text).failureReport == nil)
    }

    @Test func unorderedFailureExplainsEachCandidate() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "notifyTwice"}}
            {"expectUnordered": [{"jsonrpc": "2.0", "method": "session/event", "params": {"seq": 1}}, {"jsonrpc": "2.0", "method": "session/event", "params": {"seq": 3}}]}
            """#
        let report = await FakeServer.replay(text).failureReport ?? ""
        #expect(report.hasPrefix("t.jsonl:2: expectUnordered: pattern 2 matches none of the messages"))
        #expect(report.contains("message 1: at $.params.seq: expected 3, got 1"))
        #expect(report.contains("message 2: at $.params.seq: expected 3, got 2"))
    }

    @Test func recordedConversationReplays() async {
        // Record a conversation with the fake server's volatile ids, then replay
        // it: the generalized ids must match fresh ones.
        final class Lines: @unchecked Sendable {
            private let lock = NSLock()
            private var storage: [String] = []
            func append(_ line: String) { lock.withLock { storage.append(line) } }
            var text: String { lock.withLock { storage.joined() } }
        }
        let lines = Lines()
        let recorder = TranscriptRecorder(description: "recorded") { lines.append($0) }
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":1,"method":"session"}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1234","createdAt":"2024-01-01T00:00:00.5+00:00"}}"#))
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":2,"method":"askClient","params":{"sessionId":"s-1234"}}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","id":100,"method":"tool/call","params":{"sessionId":"s-1234","callId":"c-77","name":"lookup"}}"#))
        recorder.clientSent(json(#"{"jsonrpc":"2.0","id":100,"result":{"outcome":"ok","content":"c-77"}}"#))
        recorder.serverSent(json(#"{"jsonrpc":"2.0","id":2,"result":{"clientSaid":{"outcome":"ok","content":"c-77"}}}"#))
        let result = await FakeServer.replay(lines.text)
        #expect(result.failureReport == nil)
        #expect(result.steps == 6)
    }

    @Test func commandLineRunsFilesAndDirectories() async throws {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
        let pass = #"{"send": {"jsonrpc": "2.0", "id": 1, "method": "echo"}}"# + "\n" + #"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"echo": {}}}}"# + "\n"
        let fail = #"{"send": {"jsonrpc": "2.0", "id": 1, "method": "echo"}}"# + "\n" + #"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"echo": {"x": 1}}}}"# + "\n"
        try pass.write(toFile: directory + "/a-pass.jsonl", atomically: true, encoding: .utf8)
        try fail.write(toFile: directory + "/sub/b-fail.jsonl", atomically: true, encoding: .utf8)
        try "ignored".write(toFile: directory + "/notes.txt", atomically: true, encoding: .utf8)

        var output: [String] = []
        // The bound only matters when a step waits: a Python fake server can take
        // seconds to start on a loaded machine (b-fail fails on content, not time).
        let status = await TranscriptReplayer.runCommandLine(arguments: ["--timeout", "30", directory], executable: FakeServer.path) { output.append($0) }
        #expect(status == 1)
        #expect(output.first == "PASS \(directory)/a-pass.jsonl (2 steps)")
        #expect(output.contains("FAIL \(directory)/sub/b-fail.jsonl"))
        #expect(output.contains { $0.hasPrefix("\(directory)/sub/b-fail.jsonl:2: expect: at $.result.echo.x: missing (expected 1)") })
        #expect(output.last == "1 passed, 1 failed")

        output = []
        #expect(await TranscriptReplayer.runCommandLine(arguments: [directory + "/a-pass.jsonl"], executable: FakeServer.path) { output.append($0) } == 0)
        #expect(output.last == "1 passed, 0 failed")
        output = []
        #expect(await TranscriptReplayer.runCommandLine(arguments: ["--verbose", directory + "/a-pass.jsonl"], executable: FakeServer.path) { output.append($0) } == 0)
        #expect(output.contains { $0.hasPrefix("  started \(FakeServer.path) serve") })
        #expect(output.contains(#"  -> {"id":1,"jsonrpc":"2.0","method":"echo"}"#))
        #expect(output.contains(#"  <- {"id":1,"jsonrpc":"2.0","result":{"echo":{}}}"#))
        #expect(await TranscriptReplayer.runCommandLine(arguments: ["--bogus"], executable: FakeServer.path) { _ in } == 2)
        #expect(await TranscriptReplayer.runCommandLine(arguments: [directory + "/missing"], executable: FakeServer.path) { _ in } == 2)
    }
}

@Suite struct TranscriptExpectFileTests {
    /// A transcript whose fake server appends to `$tmpdir/d.jsonl`; `steps` follow the header.
    func replay(_ steps: String, timeout: Double = 30) async -> TranscriptResult {
        let header = #"{"transcript": {"args": ["--dump", "$tmpdir/d.jsonl"]}}"#
        return await FakeServer.replay(header + "\n" + steps, timeout: timeout)
    }

    @Test func matchesNewLinesInOrderWithCapturesAcrossSteps() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "dump", "params": {"lines": [{"n": 1, "id": "a-7", "big": {"x": 1, "y": 2}}, {"n": 2, "ref": "a-7"}]}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 1, "id": "$capture:id", "big": {"$partial": true, "x": 1}}, {"n": 2, "ref": "$ref:id"}]}}
            {"send": {"jsonrpc": "2.0", "id": 2, "method": "dump", "params": {"lines": [{"n": 3}]}}}
            {"expect": {"jsonrpc": "2.0", "id": 2, "result": {}}}
            {"comment": "only the line after those already matched"}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 3}]}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": []}}
            {"send": {"jsonrpc": "2.0", "id": 3, "method": "echo", "params": {"id": "$ref:id"}}}
            {"expect": {"jsonrpc": "2.0", "id": 3, "result": {"echo": {"id": "a-7"}}}}
            """#
        let result = await replay(text)
        #expect(result.failureReport == nil)
        #expect(result.steps == 9)
    }

    @Test func waitsForLinesWrittenLaterAndIgnoresAnUnfinishedLine() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "dump", "params": {"lines": [{"n": 1}], "raw": "{\"n\": 2", "afterSeconds": 0.3}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 1}]}}
            {"send": {"jsonrpc": "2.0", "id": 2, "method": "dump", "params": {"raw": "}\n"}}}
            {"expect": {"jsonrpc": "2.0", "id": 2, "result": {}}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 2}]}}
            """#
        let result = await replay(text)
        #expect(result.failureReport == nil)
    }

    @Test func moreLinesThanExpectedFailUnlessAtLeast() async {
        let dumpTwo = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "dump", "params": {"lines": [{"n": 1}, {"n": 2}]}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            """#
        let strict = await replay(dumpTwo + "\n" + #"{"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 1}]}}"#)
        let report = strict.failureReport ?? ""
        #expect(report.hasPrefix("t.jsonl:4: expectFile: $tmpdir/d.jsonl ("))
        #expect(report.contains("has 1 more line than the 1 expected (add \"atLeast\": true to allow that)"))
        #expect(report.contains(#"line 2: {"n": 2}"#))

        let loose = dumpTwo + "\n" + #"""
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 1}], "atLeast": true}}
            {"comment": "the rest stays for the next step"}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 2}]}}
            """#
        #expect(await replay(loose).failureReport == nil)
    }

    @Test func fewerLinesTimeOut() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "dump", "params": {"lines": [{"n": 1}]}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 1}, {"n": 2}], "atLeast": true}, "timeoutSeconds": 0.3}
            """#
        // The report names the 0.3 s limit that fired (no elapsed-time assertion).
        let report = await replay(text).failureReport ?? ""
        #expect(report.contains("has 1 new line after 0.3 s, expected at least 2"))
        #expect(report.contains(#"line 1: {"n": 1}"#))
        let missing = #"{"expectFile": {"path": "$tmpdir/none.jsonl", "lines": []}, "timeoutSeconds": 0.2}"#
        #expect(await replay(missing).failureReport?.contains("none.jsonl) does not exist after 0.2 s") == true)
    }

    @Test func mismatchNamesFileLineAndPattern() async {
        let text = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "dump", "params": {"lines": [{"n": 1}, {"n": 2, "model": "a"}]}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": [{"n": 1}, {"n": 2, "model": "b"}]}}
            """#
        let report = await replay(text).failureReport ?? ""
        #expect(report.contains(#"line 2 (pattern 2): at $.model: expected "b", got "a""#))
        #expect(report.contains("  expected:\n"))
        let notJSON = #"""
            {"send": {"jsonrpc": "2.0", "id": 1, "method": "dump", "params": {"raw": "plain text\n"}}}
            {"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}
            {"expectFile": {"path": "$tmpdir/d.jsonl", "lines": ["$any"]}}
            """#
        #expect(await replay(notJSON).failureReport?.contains("line 1 is not JSON") == true)
    }

    @Test func badStepsAreRefusedWhenTheFileLoads() {
        func error(_ step: String) -> String? {
            do {
                _ = try TranscriptScript.parse(step)
                return nil
            } catch {
                return error.description
            }
        }
        #expect(error(#"{"expectFile": {"lines": []}}"#) == #"line 1: expectFile needs a "path" string"#)
        #expect(error(#"{"expectFile": {"path": "x"}}"#)?.hasPrefix(#"line 1: expectFile needs "lines""#) == true)
        #expect(error(#"{"expectFile": {"path": "x", "lines": [], "exact": true}}"#)?.hasPrefix(#"line 1: unknown expectFile field "exact""#) == true)
        #expect(error(#"{"expectFile": {"path": "x", "lines": [], "atLeast": 1}}"#) == #"line 1: expectFile "atLeast" must be a boolean"#)
        #expect(error(#"{"expectFile": {"path": "x", "lines": [{"a": "$strng"}]}}"#)?.hasPrefix("line 1: expectFile lines[0] pattern at $.a: unknown placeholder") == true)
        #expect(error(#"{"expectFile": {"path": "x", "lines": [{"a": 1}]}, "timeoutSeconds": 1}"#) == nil)
    }
}

/// Replays the committed `Tests/Transcripts/*.jsonl` against the `agentrpc`
/// binary built beside the tests, so `swift test` runs them too.
@Suite struct CommittedTranscriptTests {
    final class BundleMarker {}

    static var transcriptDirectory: String {
        // Tests/AgentRPCTests/<this file> → Tests/Transcripts
        let here = URL(fileURLWithPath: #filePath)
        return here.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Transcripts").path
    }

    /// The built server: next to the test executable on Linux, next to the
    /// `.xctest` bundle on macOS.
    static var builtServer: String? {
        let bundle = Bundle(for: BundleMarker.self).bundleURL
        let candidates = [bundle.appendingPathComponent("agentrpc"), bundle.deletingLastPathComponent().appendingPathComponent("agentrpc")]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }?.path
    }

    @Test func committedTranscriptsPass() async {
        guard !TranscriptReplayer.transcriptFiles(under: Self.transcriptDirectory).isEmpty else { return }
        guard let server = Self.builtServer else {
            Issue.record("cannot find the built agentrpc binary next to the tests")
            return
        }
        var output: [String] = []
        let status = await TranscriptReplayer.runCommandLine(arguments: [Self.transcriptDirectory], executable: server) { output.append($0) }
        #expect(status == 0, "\(output.joined(separator: "\n"))")
    }
}
