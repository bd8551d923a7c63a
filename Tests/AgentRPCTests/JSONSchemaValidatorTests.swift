import AgentRPCProtocol
import Testing

@testable import AgentRPC

/// Validates `instance` (JSON text) against `schema` (JSON text).
private func check(_ schema: String, _ instance: String) throws -> [JSONSchemaViolation] {
    try JSONSchemaValidator(schema: JSONValue.parse(schema)).validate(JSONValue.parse(instance))
}

/// The single violation, or a test failure if there is not exactly one.
private func only(_ schema: String, _ instance: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> JSONSchemaViolation?
{
    let found = try check(schema, instance)
    #expect(found.count == 1, "expected one violation, got \(found)", sourceLocation: sourceLocation)
    return found.first
}

@Suite struct JSONSchemaValidatorTests {
    // MARK: type

    @Test func typeAcceptsMatchingValues() throws {
        let cases: [(String, String)] = [
            (#""string""#, #""x""#), (#""integer""#, "3"), (#""integer""#, "3.0"), (#""number""#, "3"),
            (#""number""#, "2.5"), (#""boolean""#, "false"), (#""null""#, "null"), (#""array""#, "[]"),
            (#""object""#, "{}"), (#"["string","null"]"#, "null"),
        ]
        for (type, instance) in cases {
            #expect(try check(#"{"type":\#(type)}"#, instance).isEmpty, "\(type) should accept \(instance)")
        }
    }

    @Test func typeMismatchNamesExpectedAndActual() throws {
        let schema = #"{"type":"object","properties":{"location":{"type":"string"}}}"#
        let violation = try only(schema, #"{"location":5}"#)
        #expect(violation?.path == "$.location")
        #expect(violation?.message == "expected string, got integer 5")
        #expect(violation?.description == "at `$.location`: expected string, got integer 5")

        #expect(try only(#"{"type":"integer"}"#, "2.5")?.message == "expected integer, got number 2.5")
        #expect(try only(#"{"type":"integer"}"#, #""7""#)?.message == #"expected integer, got string "7""#)
        #expect(try only(#"{"type":["string","null"]}"#, "[1]")?.message == "expected string or null, got array")
        #expect(
            try only(#"{"type":["string","number","null"]}"#, "true")?.message
                == "expected string, number or null, got boolean true")
        #expect(try only(#"{"type":"object"}"#, "null")?.path == "$")
    }

    @Test func typeFailureSuppressesFollowOnNoise() throws {
        // Without the early return this would also say `5 is not one of [...]`.
        let found = try check(#"{"type":"string","enum":["a"],"minLength":3}"#, "5")
        #expect(found.map(\.message) == ["expected string, got integer 5"])
    }

    // MARK: objects

    @Test func requiredAndNestedProperties() throws {
        let schema = #"""
            {"type":"object","required":["a"],"properties":{
              "a":{"type":"object","required":["b","unit"],"properties":{"b":{"type":"integer"}}}}}
            """#
        #expect(try check(schema, #"{"a":{"b":1,"unit":"c"}}"#).isEmpty)
        #expect(try only(schema, "{}")?.message == "missing required property `a`")
        let missing = try only(schema, #"{"a":{"b":1}}"#)
        #expect(missing?.path == "$.a")
        #expect(missing?.message == "missing required property `unit`")
        #expect(try only(schema, #"{"a":{"b":"x","unit":1}}"#)?.path == "$.a.b")
    }

    @Test func additionalPropertiesFalseListsAllowedNames() throws {
        let schema = #"{"properties":{"a":{},"b":{}},"additionalProperties":false}"#
        #expect(try check(schema, #"{"a":1}"#).isEmpty)
        let violation = try only(schema, #"{"a":1,"zz":2}"#)
        #expect(violation?.path == "$")
        #expect(violation?.message == "unexpected property `zz`; allowed: `a`, `b`")
        #expect(
            try only(#"{"additionalProperties":false}"#, #"{"q":1}"#)?.message
                == "unexpected property `q`; this object takes no properties")
    }

    @Test func additionalPropertiesSchemaAppliesToUnlistedMembers() throws {
        let schema = #"{"properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}"#
        #expect(try check(schema, #"{"a":"x","n":1}"#).isEmpty)
        let violation = try only(schema, #"{"a":"x","n":"1"}"#)
        #expect(violation?.path == "$.n")
        #expect(violation?.message == #"expected integer, got string "1""#)
    }

    @Test func patternPropertiesCountAsDeclared() throws {
        let schema = #"{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}"#
        #expect(try check(schema, #"{"x-a":"ok"}"#).isEmpty)
        #expect(try only(schema, #"{"x-a":1}"#)?.path == #"$["x-a"]"#)
        #expect(try only(schema, #"{"y":1}"#)?.message == "unexpected property `y`")
    }

    @Test func propertyCountsAndDependentRequired() throws {
        #expect(
            try only(#"{"minProperties":2}"#, #"{"a":1}"#)?.message == "must have at least 2 properties, got 1")
        #expect(
            try only(#"{"maxProperties":1}"#, #"{"a":1,"b":2}"#)?.message == "must have at most 1 property, got 2")
        let schema = #"{"dependentRequired":{"card":["cvv"]}}"#
        #expect(try check(schema, #"{"other":1}"#).isEmpty)
        #expect(
            try only(schema, #"{"card":"4111"}"#)?.message
                == "missing property `cvv`, which is required when `card` is present")
    }

    // MARK: enum / const

    @Test func enumMessageListsAllowedValues() throws {
        let schema = #"{"enum":["c","f"]}"#
        #expect(try check(schema, #""c""#).isEmpty)
        #expect(try only(schema, #""celsius""#)?.message == #""celsius" is not one of ["c","f"]"#)
        // 1 and 1.0 are the same number to JSON Schema.
        #expect(try check(#"{"enum":[1,2]}"#, "1.0").isEmpty)
        #expect(try check(#"{"enum":[null]}"#, "null").isEmpty)
        #expect(try only(#"{"enum":[1]}"#, #""1""#)?.message == #""1" is not one of [1]"#)
    }

    @Test func constComparesNumerically() throws {
        #expect(try check(#"{"const":2}"#, "2.0").isEmpty)
        #expect(try check(#"{"const":{"a":[1]}}"#, #"{"a":[1.0]}"#).isEmpty)
        #expect(try only(#"{"const":"x"}"#, #""y""#)?.message == #"must be "x", got "y""#)
        // `const: null` is a real constraint, not "no const".
        #expect(try only(#"{"const":null}"#, "0")?.message == "must be null, got 0")
    }

    // MARK: arrays

    @Test func itemsReportIndexPaths() throws {
        let schema = #"{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer"}}}}"#
        #expect(try check(schema, #"[{"n":1},{"n":2}]"#).isEmpty)
        let violation = try only(schema, #"[{"n":1},{"n":true}]"#)
        #expect(violation?.path == "$[1].n")
        #expect(violation?.message == "expected integer, got boolean true")
    }

    @Test func prefixItemsAndClosedTuples() throws {
        let schema = #"{"prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}"#
        #expect(try check(schema, #"["a",1]"#).isEmpty)
        #expect(try check(schema, #"["a"]"#).isEmpty)
        #expect(try only(schema, #"["a","b"]"#)?.path == "$[1]")
        #expect(try only(schema, #"["a",1,2]"#)?.message == "must have at most 2 items, got 3")

        let open = #"{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}"#
        #expect(try only(open, #"["a",1,"c"]"#)?.path == "$[2]")

        // The draft-07 tuple spelling that older tool schemas still use.
        let legacy = #"{"items":[{"type":"string"}],"additionalItems":{"type":"integer"}}"#
        #expect(try check(legacy, #"["a",2]"#).isEmpty)
        #expect(try only(legacy, #"[1,2]"#)?.path == "$[0]")
        #expect(try only(legacy, #"["a","b"]"#)?.path == "$[1]")
    }

    @Test func itemCountsAndUniqueness() throws {
        #expect(try only(#"{"minItems":1}"#, "[]")?.message == "must have at least 1 item, got 0")
        #expect(try only(#"{"maxItems":2}"#, "[1,2,3]")?.message == "must have at most 2 items, got 3")
        #expect(try check(#"{"uniqueItems":true}"#, #"[1,"1",[1],{"a":1}]"#).isEmpty)
        #expect(
            try only(#"{"uniqueItems":true}"#, "[1,2,1.0]")?.message
                == "items must be unique, but [0] and [2] are equal")
        #expect(try check(#"{"uniqueItems":false}"#, "[1,1]").isEmpty)
    }

    // MARK: numbers

    @Test func numericBounds() throws {
        let schema = #"{"minimum":1,"maximum":14}"#
        #expect(try check(schema, "1").isEmpty)
        #expect(try check(schema, "14.0").isEmpty)
        #expect(try only(schema, "0")?.message == "must be >= 1, got 0")
        #expect(try only(schema, "14.5")?.message == "must be <= 14, got 14.5")
        #expect(try only(#"{"exclusiveMinimum":0}"#, "0")?.message == "must be > 0, got 0")
        #expect(try check(#"{"exclusiveMinimum":0}"#, "0.001").isEmpty)
        #expect(try only(#"{"exclusiveMaximum":1.5}"#, "1.5")?.message == "must be < 1.5, got 1.5")
        // Bounds do not apply to non-numbers.
        #expect(try check(schema, #""zero""#).isEmpty)
        // Large integers compare exactly.
        #expect(try only(#"{"maximum":9007199254740992}"#, "9007199254740993") != nil)
    }

    @Test func multipleOf() throws {
        #expect(try check(#"{"multipleOf":5}"#, "15").isEmpty)
        #expect(try only(#"{"multipleOf":5}"#, "7")?.message == "must be a multiple of 5, got 7")
        #expect(try check(#"{"multipleOf":0.1}"#, "0.3").isEmpty)
        #expect(try check(#"{"multipleOf":0.01}"#, "19.99").isEmpty)
        #expect(try only(#"{"multipleOf":0.5}"#, "0.7") != nil)
        #expect(try only(#"{"multipleOf":2}"#, "3.0") != nil)
    }

    // MARK: strings

    @Test func lengthCountsCodePoints() throws {
        // "é" as e + combining accent is 2 code points; the emoji is 1.
        #expect(try check(#"{"maxLength":2}"#, #""e\u0301""#).isEmpty)
        #expect(try check(#"{"minLength":1,"maxLength":1}"#, #""😀""#).isEmpty)
        #expect(try only(#"{"minLength":3}"#, #""ab""#)?.message == "must be at least 3 characters long, got 2")
        #expect(try only(#"{"maxLength":1}"#, #""ab""#)?.message == "must be at most 1 character long, got 2")
    }

    @Test func patternIsAnUnanchoredSearch() throws {
        #expect(try check(#"{"pattern":"b"}"#, #""abc""#).isEmpty)
        #expect(try check(#"{"pattern":"^[A-Z]{3}$"}"#, #""EUR""#).isEmpty)
        let violation = try only(#"{"pattern":"^[A-Z]{3}$"}"#, #""euro""#)
        #expect(violation?.message == #""euro" does not match the pattern `^[A-Z]{3}$`"#)
        #expect(try check(#"{"pattern":"^\\d+$"}"#, "12").isEmpty, "pattern ignores non-strings")
    }

    // MARK: combinators

    @Test func anyOfMergesPlainTypeMismatches() throws {
        let schema = #"{"anyOf":[{"type":"string"},{"type":"null"}]}"#
        #expect(try check(schema, "null").isEmpty)
        #expect(try only(schema, "3")?.message == "expected string or null, got integer 3")
    }

    @Test func anyOfReportsTheOnlyBranchOfTheRightType() throws {
        let schema = #"""
            {"anyOf":[{"type":"string"},
                      {"type":"object","required":["id"],"properties":{"id":{"type":"integer"}}}]}
            """#
        let violation = try only(schema, #"{"id":"x"}"#)
        #expect(violation?.path == "$.id")
        #expect(violation?.message == #"expected integer, got string "x""#)

        // All of that branch's problems, not just the first few.
        let many = #"{"anyOf":[{"type":"null"},{"type":"array","items":{"type":"string"}}]}"#
        #expect(try check(many, "[1,2,3,4,5,6]").map(\.path) == ["$[0]", "$[1]", "$[2]", "$[3]", "$[4]", "$[5]"])
    }

    @Test func anyOfSummarizesSeveralPlausibleBranches() throws {
        let schema = #"""
            {"anyOf":[{"type":"object","required":["city"]},
                      {"type":"object","required":["lat","lon"],"properties":{"lat":{"type":"number"}}}]}
            """#
        #expect(try check(schema, #"{"city":"Oslo"}"#).isEmpty)
        let violation = try only(schema, #"{"lat":"north"}"#)
        #expect(violation?.path == "$")
        #expect(
            violation?.message
                == "does not match any of the allowed forms; form 1: missing required property `city`; "
                + #"form 2: missing required property `lon`, at `$.lat`: expected number, got string "north""#)
    }

    @Test func oneOfRequiresExactlyOne() throws {
        let schema = #"{"oneOf":[{"type":"integer"},{"minimum":0}]}"#
        #expect(try check(schema, "-1").isEmpty)
        #expect(try check(schema, "0.5").isEmpty)
        #expect(
            try only(schema, "3")?.message
                == "matches more than one of the allowed forms (1, 2) but must match exactly one")
        #expect(try only(#"{"oneOf":[{"type":"integer"},{"type":"string"}]}"#, "true") != nil)
    }

    @Test func allOfReportsEveryBranch() throws {
        let schema = #"{"allOf":[{"required":["a"]},{"required":["b"]}]}"#
        #expect(try check(schema, #"{"a":1,"b":2}"#).map(\.message) == [])
        #expect(
            try check(schema, "{}").map(\.message)
                == ["missing required property `a`", "missing required property `b`"])
    }

    @Test func notAndIfThenElse() throws {
        let not = #"{"not":{"type":"string"}}"#
        #expect(try check(not, "1").isEmpty)
        #expect(try only(not, #""s""#)?.message == "must not match the schema at `#/not`")

        let conditional = #"""
            {"if":{"properties":{"unit":{"const":"f"}}},
             "then":{"properties":{"temp":{"maximum":212}}},
             "else":{"properties":{"temp":{"maximum":100}}}}
            """#
        #expect(try check(conditional, #"{"unit":"f","temp":150}"#).isEmpty)
        #expect(try only(conditional, #"{"unit":"c","temp":150}"#)?.path == "$.temp")
    }

    @Test func booleanSchemas() throws {
        #expect(try check("true", #"{"anything":[1]}"#).isEmpty)
        #expect(try only("false", "1")?.message == "no value is allowed here")
        #expect(try only(#"{"properties":{"gone":false}}"#, #"{"gone":1}"#)?.path == "$.gone")
    }

    // MARK: $ref

    @Test func refToDefsAndDefinitions() throws {
        let schema = #"""
            {"$defs":{"Unit":{"enum":["c","f"]}},"definitions":{"Day":{"type":"integer","minimum":1}},
             "properties":{"unit":{"$ref":"#/$defs/Unit"},"days":{"$ref":"#/definitions/Day"}}}
            """#
        #expect(try check(schema, #"{"unit":"c","days":3}"#).isEmpty)
        #expect(try check(schema, #"{"unit":"k","days":0}"#).map(\.path) == ["$.days", "$.unit"])
    }

    @Test func refSiblingsStillApply() throws {
        let schema = ##"{"$defs":{"S":{"type":"string"}},"$ref":"#/$defs/S","maxLength":2}"##
        #expect(try only(schema, #""abc""#)?.message == "must be at most 2 characters long, got 3")
        #expect(try only(schema, "1")?.message == "expected string, got integer 1")
    }

    @Test func recursiveSchemaValidatesDeepPaths() throws {
        let schema = #"""
            {"$defs":{"Node":{"type":"object","required":["name"],
               "properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}},
             "$ref":"#/$defs/Node"}
            """#
        let good = #"{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}"#
        #expect(try check(schema, good).isEmpty)
        let bad = #"{"name":"a","children":[{"name":"b","children":[{"name":"c"},{"name":4}]}]}"#
        let violation = try only(schema, bad)
        #expect(violation?.path == "$.children[0].children[1].name")

        // `#` is the root, so the root itself can recurse.
        let list = ##"{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}}}"##
        #expect(try only(list, #"{"v":1,"next":{"v":2,"next":{"v":"3"}}}"#)?.path == "$.next.next.v")
    }

    @Test func excessiveRecursionIsReportedNotCrashed() throws {
        let schema = try JSONValue.parse(##"{"items":{"$ref":"#"}}"##)
        var instance: JSONValue = []
        for _ in 0..<400 { instance = [instance] }
        let found = try JSONSchemaValidator(schema: schema).validate(instance)
        #expect(found.count == 1)
        #expect(found.first?.message.contains("nested too deeply") == true)
    }

    @Test func refWithEscapedPointer() throws {
        let schema = #"{"$defs":{"a/b":{"type":"string"},"c d":{"type":"integer"}},"#
            + ##""properties":{"x":{"$ref":"#/$defs/a~1b"},"y":{"$ref":"#/$defs/c%20d"}}}"##
        #expect(try check(schema, #"{"x":"s","y":1}"#).isEmpty)
        #expect(try check(schema, #"{"x":1,"y":"s"}"#).count == 2)
    }

    // MARK: malformed schemas

    @Test(arguments: [
        (#"{"type":5}"#, "#/type"),
        (#"{"type":"float"}"#, "#/type"),
        (#"{"required":"a"}"#, "#/required"),
        (#"{"required":["a",1]}"#, "#/required"),
        (#"{"properties":{"a":3}}"#, "#/properties/a"),
        (#"{"pattern":"("}"#, "#/pattern"),
        (#"{"patternProperties":{"[":{}}}"#, "#/patternProperties/["),
        (##"{"$ref":"#/$defs/Missing"}"##, "#/$ref"),
        (##"{"$ref":"https://example.com/s.json"}"##, "#/$ref"),
        (##"{"$ref":"#anchor"}"##, "#/$ref"),
        (##"{"$ref":"#"}"##, "#"),
        (##"{"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"anyOf":[{"$ref":"#/$defs/A"}]}}}"##, "#/$defs/B/anyOf/0"),
        (#"{"$defs":{"Broken":{"minimum":"1"}}}"#, "#/$defs/Broken/minimum"),
        (#"{"minLength":-1}"#, "#/minLength"),
        (#"{"maxItems":1.5}"#, "#/maxItems"),
        (#"{"multipleOf":0}"#, "#/multipleOf"),
        (#"{"exclusiveMinimum":true}"#, "#/exclusiveMinimum"),
        (#"{"anyOf":[]}"#, "#/anyOf"),
        (#"{"items":{"type":"nope"}}"#, "#/items/type"),
        (##"{"$dynamicRef":"#meta"}"##, "#/$dynamicRef"),
        ("[]", "#"),
    ])
    func malformedSchemaThrowsWithSchemaPath(schema: String, expectedPath: String) throws {
        let value = try JSONValue.parse(schema)
        do {
            _ = try JSONSchemaValidator(schema: value)
            Issue.record("\(schema) should have been rejected")
        } catch {
            #expect(error.schemaPath == expectedPath, "\(error)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test func unknownKeywordsAndAnnotationsAreIgnored() throws {
        let schema = #"""
            {"title":"T","description":"d","default":1,"examples":[1],"format":"email","x-custom":{"type":5},
             "type":"string"}
            """#
        #expect(try check(schema, #""not an email""#).isEmpty)
    }

    // MARK: realistic use

    static let weather = #"""
        {"type":"object",
         "properties":{
           "location":{"type":"string","description":"City name","minLength":1},
           "unit":{"type":"string","enum":["c","f"]},
           "days":{"type":"integer","minimum":1,"maximum":14}},
         "required":["location","unit"],
         "additionalProperties":false}
        """#

    @Test func weatherToolAcceptsGoodCalls() throws {
        #expect(try check(Self.weather, #"{"location":"Oslo","unit":"c"}"#).isEmpty)
        #expect(try check(Self.weather, #"{"location":"Oslo","unit":"f","days":14}"#).isEmpty)
        #expect(try check(Self.weather, #"{"location":"Oslo","unit":"f","days":3.0}"#).isEmpty)
    }

    @Test func weatherToolExplainsBadCalls() throws {
        #expect(
            try check(Self.weather, #"{"location":42,"unit":"c"}"#).map(\.description)
                == ["at `$.location`: expected string, got integer 42"])
        #expect(
            try check(Self.weather, #"{"location":"Oslo"}"#).map(\.description)
                == ["at `$`: missing required property `unit`"])
        #expect(
            try check(Self.weather, #"{"location":"Oslo","unit":"celsius"}"#).map(\.description)
                == [#"at `$.unit`: "celsius" is not one of ["c","f"]"#])
        #expect(
            try check(Self.weather, #"{"location":"Oslo","unit":"c","days":30}"#).map(\.description)
                == ["at `$.days`: must be <= 14, got 30"])
        #expect(
            try check(Self.weather, #"{"location":"Oslo","unit":"c","days":"3"}"#).map(\.description)
                == [#"at `$.days`: expected integer, got string "3""#])
        #expect(
            try check(Self.weather, #"{"location":"Oslo","unit":"c","city":"Oslo"}"#).map(\.description)
                == ["at `$`: unexpected property `city`; allowed: `days`, `location`, `unit`"])
        #expect(
            try check(Self.weather, "[]").map(\.description) == ["at `$`: expected object, got array"])
    }

    @Test func multipleViolationsComeInDocumentOrder() throws {
        let found = try check(Self.weather, #"{"unit":"k","days":0,"extra":true,"location":""}"#)
        #expect(
            found.map(\.description) == [
                "at `$`: unexpected property `extra`; allowed: `days`, `location`, `unit`",
                "at `$.days`: must be >= 1, got 0",
                "at `$.location`: must be at least 1 character long, got 0",
                #"at `$.unit`: "k" is not one of ["c","f"]"#,
            ])
    }

    @Test func violationCountIsCapped() throws {
        let validator = try JSONSchemaValidator(schema: JSONValue.parse(#"{"items":{"type":"string"}}"#))
        let instance = JSONValue.array(Array(repeating: .int(1), count: 500))
        #expect(validator.validate(instance).count == JSONSchemaValidator.defaultViolationLimit)
        #expect(validator.validate(instance, limit: 3).map(\.path) == ["$[0]", "$[1]", "$[2]"])
        #expect(!validator.isValid(instance))
        #expect(validator.isValid(["a", "b"]))
    }

    @Test func oddKeysRenderInBrackets() throws {
        let schema = #"{"properties":{"my key":{"type":"string"},"2x":{"type":"string"}}}"#
        #expect(try check(schema, #"{"my key":1,"2x":1}"#).map(\.path) == [#"$["2x"]"#, #"$["my key"]"#])
    }

    @Test func oneCompiledValidatorServesConcurrentCallers() async throws {
        let validator = try JSONSchemaValidator(schema: JSONValue.parse(Self.weather))
        let counts = await withTaskGroup(of: Int.self) { group in
            for day in 0..<32 {
                group.addTask {
                    validator.validate(["location": "Oslo", "unit": "c", "days": .int(day)]).count
                }
            }
            var all: [Int] = []
            for await count in group { all.append(count) }
            return all
        }
        #expect(counts.filter { $0 == 0 }.count == 14)
    }
}
