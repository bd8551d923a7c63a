import Testing
@testable import AgentRPCProtocol

private struct Flat: Decodable {
    var name: String
    var count: Int
    var ratio: Double
    var on: Bool
    var note: String?
    var small: UInt8?
}

private struct Inner: Decodable {
    var v: Int
}

private struct Outer: Decodable {
    var inner: Inner
    var list: [Inner]
    var map: [String: Int]
    var opt: Inner?
    var free: JSONValue
    var grid: [[Double]]
}

/// Optional values decoded with `decode(T?.self)`: required but nullable.
private struct Nullables: Decodable {
    var a: String?
    var b: Inner?
    var c: [Int?]
    var d: Color?
    enum CodingKeys: String, CodingKey { case a, b, c, d }
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        a = try c.decode(String?.self, forKey: .a)
        b = try c.decode(Inner?.self, forKey: .b)
        self.c = try c.decode([Int?].self, forKey: .c)
        d = try c.decode(Color?.self, forKey: .d)
    }
}

private enum Color: String, Decodable, JSONSchemaStringEnum {
    case red, green
}

private struct Paint: Decodable {
    var color: Color
    var others: [Color]?
}

private struct TreeNode: Decodable {
    var name: String
    var children: [TreeNode]
    var byName: [String: TreeNode]
    var siblings: [TreeNode]?
}

private final class LinkedNode: Decodable {
    let value: Int
    let next: LinkedNode?
}

/// Free-form content whose decoding branches on the JSON, so it states its schema.
private enum Content: Decodable, JSONSchemaProviding {
    case text(String)
    case image(ImageRef)

    init(from decoder: any Decoder) throws {
        if let text = try? decoder.singleValueContainer().decode(String.self) {
            self = .text(text)
        } else {
            self = .image(try ImageRef(from: decoder))
        }
    }

    static var jsonSchema: JSONValue { ["anyOf": [["type": "string"], ["$ref": "#/$defs/ImageRef"]]] }
    static var jsonSchemaDependencies: [any Decodable.Type] { [ImageRef.self] }
}

private struct ImageRef: Decodable {
    var url: String
}

private struct Message: Decodable {
    var content: Content
    var parts: [Content]
}

/// Reads through nested containers, `contains` and `superDecoder`.
private struct Handwritten: Decodable {
    var a: Int
    var b: Int?
    var pair: [String]
    var inner: String
    var parent: String

    enum Keys: String, CodingKey { case a, b, pair, nested, inner }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        a = try c.decode(Int.self, forKey: .a)
        b = c.contains(.b) ? try c.decode(Int.self, forKey: .b) : nil
        var u = try c.nestedUnkeyedContainer(forKey: .pair)
        pair = []
        while !u.isAtEnd { pair.append(try u.decode(String.self)) }
        let n = try c.nestedContainer(keyedBy: Keys.self, forKey: .nested)
        inner = try n.decode(String.self, forKey: .inner)
        parent = try c.superDecoder().singleValueContainer().decode(String.self)
    }
}

private struct Validating: Decodable {
    var id: String
    init(from decoder: any Decoder) throws {
        id = try decoder.singleValueContainer().decode(String.self)
        guard id.hasPrefix("x") else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "ids start with x"))
        }
    }
}

private struct HasValidating: Decodable {
    var id: Validating
}

private enum Shape: Decodable {
    case circle(radius: Double)
}

enum SchemaTestMethodA {
    struct Params: Decodable { var a: Int }
}

enum SchemaTestMethodB {
    struct Params: Decodable { var b: String }
}

private struct BothParams: Decodable {
    var first: SchemaTestMethodA.Params
    var second: SchemaTestMethodB.Params
}

private let dialect: JSONValue = "https://json-schema.org/draft/2020-12/schema"

@Suite struct SchemaGeneratorTests {
    @Test func flatStruct() throws {
        #expect(try JSONSchemaGenerator.schema(for: Flat.self) == [
            "$schema": dialect,
            "$ref": "#/$defs/Flat",
            "$defs": [
                "Flat": [
                    "type": "object",
                    "properties": [
                        "name": ["type": "string"],
                        "count": ["type": "integer"],
                        "ratio": ["type": "number"],
                        "on": ["type": "boolean"],
                        "note": ["type": "string"],
                        "small": ["type": "integer"],
                    ],
                    "required": ["count", "name", "on", "ratio"],
                    "additionalProperties": false,
                ]
            ],
        ])
    }

    @Test func nestedArraysDictionariesOptionalsAndFreeForm() throws {
        let inner: JSONValue = ["$ref": "#/$defs/Inner"]
        #expect(try JSONSchemaGenerator.schema(for: Outer.self) == [
            "$schema": dialect,
            "$ref": "#/$defs/Outer",
            "$defs": [
                "Inner": [
                    "type": "object",
                    "properties": ["v": ["type": "integer"]],
                    "required": ["v"],
                    "additionalProperties": false,
                ],
                "Outer": [
                    "type": "object",
                    "properties": [
                        "inner": inner,
                        "list": ["type": "array", "items": inner],
                        "map": ["type": "object", "additionalProperties": ["type": "integer"]],
                        "opt": inner,
                        "free": [:],
                        "grid": ["type": "array", "items": ["type": "array", "items": ["type": "number"]]],
                    ],
                    "required": ["free", "grid", "inner", "list", "map"],
                    "additionalProperties": false,
                ],
            ],
        ])
    }

    @Test func anonymousRootsAreInline() throws {
        #expect(try JSONSchemaGenerator.schema(for: [String].self) == ["$schema": dialect, "type": "array", "items": ["type": "string"]])
        #expect(try JSONSchemaGenerator.schema(for: [String: Inner].self) == [
            "$schema": dialect,
            "type": "object",
            "additionalProperties": ["$ref": "#/$defs/Inner"],
            "$defs": ["Inner": ["type": "object", "properties": ["v": ["type": "integer"]], "required": ["v"], "additionalProperties": false]],
        ])
        #expect(try JSONSchemaGenerator.schema(for: Int?.self) == ["$schema": dialect, "type": ["integer", "null"]])
        #expect(try JSONSchemaGenerator.schema(for: JSONValue.self) == ["$schema": dialect])
    }

    @Test func nullableValues() throws {
        let schema = try JSONSchemaGenerator.schema(for: Nullables.self)
        #expect(schema["$defs"]?["Nullables"] == [
            "type": "object",
            "properties": [
                "a": ["type": ["string", "null"]],
                "b": ["anyOf": [["$ref": "#/$defs/Inner"], ["type": "null"]]],
                "c": ["type": "array", "items": ["type": ["integer", "null"]]],
                "d": ["anyOf": [["type": "string", "enum": ["red", "green"]], ["type": "null"]]],
            ],
            "required": ["a", "b", "c", "d"],
            "additionalProperties": false,
        ])
    }

    @Test func stringEnums() throws {
        let color: JSONValue = ["type": "string", "enum": ["red", "green"]]
        #expect(try JSONSchemaGenerator.schema(for: Color.self) == ["$schema": dialect, "type": "string", "enum": ["red", "green"]])
        #expect(try JSONSchemaGenerator.schema(for: Paint.self)["$defs"] == [
            "Paint": [
                "type": "object",
                "properties": ["color": color, "others": ["type": "array", "items": color]],
                "required": ["color"],
                "additionalProperties": false,
            ]
        ])
    }

    @Test func recursiveStruct() throws {
        let node: JSONValue = ["$ref": "#/$defs/TreeNode"]
        #expect(try JSONSchemaGenerator.schema(for: TreeNode.self) == [
            "$schema": dialect,
            "$ref": "#/$defs/TreeNode",
            "$defs": [
                "TreeNode": [
                    "type": "object",
                    "properties": [
                        "name": ["type": "string"],
                        "children": ["type": "array", "items": node],
                        "byName": ["type": "object", "additionalProperties": node],
                        "siblings": ["type": "array", "items": node],
                    ],
                    "required": ["byName", "children", "name"],
                    "additionalProperties": false,
                ]
            ],
        ])
        // Reached through an anonymous root, the definition is the same.
        let list = try JSONSchemaGenerator.schema(for: [TreeNode].self)
        #expect(list["items"] == node)
        #expect(list["$defs"]?["TreeNode"]?["required"] == ["byName", "children", "name"])
    }

    @Test func recursiveClass() throws {
        #expect(try JSONSchemaGenerator.schema(for: LinkedNode.self)["$defs"] == [
            "LinkedNode": [
                "type": "object",
                "properties": ["value": ["type": "integer"], "next": ["$ref": "#/$defs/LinkedNode"]],
                "required": ["value"],
                "additionalProperties": false,
            ]
        ])
    }

    @Test func providedSchemasAndTheirDependencies() throws {
        let content: JSONValue = ["anyOf": [["type": "string"], ["$ref": "#/$defs/ImageRef"]]]
        #expect(try JSONSchemaGenerator.schema(for: Message.self) == [
            "$schema": dialect,
            "$ref": "#/$defs/Message",
            "$defs": [
                "ImageRef": ["type": "object", "properties": ["url": ["type": "string"]], "required": ["url"], "additionalProperties": false],
                "Message": [
                    "type": "object",
                    "properties": ["content": content, "parts": ["type": "array", "items": content]],
                    "required": ["content", "parts"],
                    "additionalProperties": false,
                ],
            ],
        ])
    }

    @Test func emptyAndNull() throws {
        #expect(try JSONSchemaGenerator.schema(for: Empty.self) == ["$schema": dialect, "type": "object", "additionalProperties": false])
        #expect(try JSONSchemaGenerator.schema(for: NullResult.self) == ["$schema": dialect, "type": "null"])
    }

    @Test func handwrittenContainers() throws {
        #expect(try JSONSchemaGenerator.schema(for: Handwritten.self)["$defs"]?["Handwritten"] == [
            "type": "object",
            "properties": [
                "a": ["type": "integer"],
                "b": ["type": "integer"],
                "pair": ["type": "array", "items": ["type": "string"]],
                "nested": [
                    "type": "object",
                    "properties": ["inner": ["type": "string"]],
                    "required": ["inner"],
                    "additionalProperties": false,
                ],
                "super": ["type": "string"],
            ],
            "required": ["a", "nested", "pair"],
            "additionalProperties": false,
        ])
    }

    @Test func probingFailuresAskForJSONSchemaProviding() {
        for type in [Validating.self, HasValidating.self] as [any Decodable.Type] {
            do throws(JSONSchemaGenerationError) {
                _ = try JSONSchemaGenerator.schema(for: type)
                Issue.record("expected a failure for \(type)")
            } catch {
                #expect(error.typeName == "Validating")
                #expect(error.message.contains("Validating"))
                #expect(error.message.contains("ids start with x"))
                #expect(error.message.contains("JSONSchemaProviding"))
            }
        }
        #expect(throws: JSONSchemaGenerationError.self) { try JSONSchemaGenerator.schema(for: Shape.self) }
    }

    @Test func clashingNamesAreQualified() throws {
        let defs = try JSONSchemaGenerator.schema(for: BothParams.self)["$defs"]
        #expect(defs?["BothParams"]?["properties"] == [
            "first": ["$ref": "#/$defs/Params"],
            "second": ["$ref": "#/$defs/SchemaTestMethodB.Params"],
        ])
        #expect(defs?["SchemaTestMethodB.Params"]?["required"] == ["b"])
    }

    @Test func documentWithSharedDefinitions() throws {
        let document = try JSONSchemaGenerator.schemaDocument(definitions: [
            (name: "Outer", type: Outer.self),
            (name: "InnerList", type: [Inner].self),
            (name: "Color", type: Color.self),
        ])
        #expect(document["$schema"] == dialect)
        #expect(document["$defs"]?["InnerList"] == ["type": "array", "items": ["$ref": "#/$defs/Inner"]])
        #expect(document["$defs"]?["Color"] == ["type": "string", "enum": ["red", "green"]])
        #expect(document["$defs"]?["Outer"]?["required"] == ["free", "grid", "inner", "list", "map"])
        #expect(document["$defs"]?["Inner"]?["required"] == ["v"])
        #expect(document["$defs"]?.objectValue?.count == 4)
    }
}
