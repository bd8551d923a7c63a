import AgentRPCProtocol

/// Checks JSON values against a JSON Schema (draft 2020-12 semantics), for the
/// subset that tool input schemas and structured-output schemas use.
///
/// Compile once and reuse: regexes and `$ref` targets are resolved in `init`.
/// Supported: `type`, `enum`, `const`, `properties`, `required`,
/// `additionalProperties`, `patternProperties`, `minProperties`/`maxProperties`,
/// `dependentRequired`, `items` (and the older array form with
/// `additionalItems`), `prefixItems`, `minItems`/`maxItems`, `uniqueItems`,
/// `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`, `multipleOf`,
/// `minLength`/`maxLength`, `pattern`, `allOf`/`anyOf`/`oneOf`/`not`,
/// `if`/`then`/`else`, local `$ref` (`#`, `#/$defs/...`, `#/definitions/...`)
/// and boolean schemas. `format`, annotations and unknown keywords are ignored,
/// as the spec says.
struct JSONSchemaValidator: Sendable {
    /// How many violations `validate` reports unless told otherwise; enough to
    /// fix a bad tool call in one round without flooding the model.
    static let defaultViolationLimit = 50

    private let nodes: [SchemaNode]
    private let root: Int

    /// Compiles `schema`. Throws `JSONSchemaError`, naming the place inside the
    /// schema, if the schema is malformed (a `type` that is not a type name,
    /// `required` that is not a string array, an invalid `pattern`, a `$ref`
    /// to a missing definition or in an unsupported form, a reference cycle
    /// that would never terminate, ...).
    init(schema: JSONValue) throws(JSONSchemaError) {
        var compiler = SchemaCompiler(root: schema)
        root = try compiler.compileRoot()
        nodes = compiler.nodes
        usesPatterns = nodes.contains { $0.pattern != nil || !$0.patternProperties.isEmpty }
    }

    /// Whether validating runs user-supplied regexes (`pattern`, `patternProperties`):
    /// then the engine validates on a regex worker, off the cooperative executor.
    let usesPatterns: Bool

    /// Every violation of the schema by `instance` (empty means valid), in
    /// document order, at most `limit` of them.
    func validate(_ instance: JSONValue, limit: Int = defaultViolationLimit) -> [JSONSchemaViolation] {
        var evaluation = Evaluation(nodes: nodes, limit: max(limit, 1), path: [], depth: 0)
        evaluation.evaluate(instance, against: root)
        // Stable sort by instance path: findings come out grouped by keyword,
        // readers want them in the order the document is written.
        let ordered = evaluation.findings.enumerated().sorted { lhs, rhs in
            if lhs.element.path == rhs.element.path { return lhs.offset < rhs.offset }
            return PathComponent.precedes(lhs.element.path, rhs.element.path)
        }
        return ordered.map { JSONSchemaViolation(path: PathComponent.render($0.element.path), message: $0.element.message) }
    }

    /// Whether `instance` satisfies the schema; stops at the first violation.
    func isValid(_ instance: JSONValue) -> Bool {
        var evaluation = Evaluation(nodes: nodes, limit: 1, path: [], depth: 0)
        evaluation.evaluate(instance, against: root)
        return evaluation.findings.isEmpty
    }
}

/// One way an instance fails its schema.
struct JSONSchemaViolation: Sendable, Hashable, CustomStringConvertible {
    /// Where in the instance: `$` is the root, then `.name` for members
    /// (`["odd key"]` when the name is not an identifier) and `[0]` for items,
    /// e.g. `$.days[2]`.
    var path: String
    /// What is wrong, phrased for a model or a person to act on, e.g.
    /// "expected string, got integer 5" or "missing required property `unit`".
    var message: String

    /// Creates a violation.
    init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// "at `$.location`: expected string, got integer 5".
    var description: String { "at `\(path)`: \(message)" }
}

/// The schema itself is malformed or uses something this validator does not
/// support.
struct JSONSchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the schema, as a JSON Pointer fragment (`#/properties/unit/enum`).
    var schemaPath: String
    /// What is wrong there.
    var message: String

    /// Creates a schema error.
    init(schemaPath: String, message: String) {
        self.schemaPath = schemaPath
        self.message = message
    }

    /// "invalid schema at `#/required`: must be an array of strings".
    var description: String { "invalid schema at `\(schemaPath)`: \(message)" }
}

// MARK: - Instance paths

/// One step into an instance.
enum PathComponent: Hashable, Sendable {
    case key(String)
    case index(Int)

    static func render(_ path: [PathComponent]) -> String {
        var text = "$"
        for component in path {
            switch component {
            case .index(let offset):
                text += "[\(offset)]"
            case .key(let name) where isIdentifier(name):
                text += "." + name
            case .key(let name):
                text += "[" + JSONValue.string(name).serializedString() + "]"
            }
        }
        return text
    }

    private static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
        }
    }

    /// Document order: parents before children, keys alphabetically (objects
    /// have no order of their own), items by index.
    static func precedes(_ lhs: [PathComponent], _ rhs: [PathComponent]) -> Bool {
        for (a, b) in zip(lhs, rhs) where a != b {
            switch (a, b) {
            case (.index(let x), .index(let y)): return x < y
            case (.key(let x), .key(let y)): return x < y
            case (.index, .key): return true
            case (.key, .index): return false
            }
        }
        return lhs.count < rhs.count
    }
}

// MARK: - Evaluation

/// A violation before its path is rendered. `typeMismatch` marks a plain type
/// failure, which `anyOf`/`oneOf` use to merge branch failures into one
/// "expected string or null" message.
struct Finding {
    var path: [PathComponent]
    var message: String
    var typeMismatch: (expected: [JSONSchemaType], got: String)?
}

/// One walk of an instance against the node table.
struct Evaluation {
    /// Deep enough for any realistic tool argument, shallow enough that the
    /// recursion stays well inside a secondary thread's stack.
    static let maximumDepth = 256
    /// Findings kept per failing `anyOf`/`oneOf` branch: enough to explain the
    /// branch, and one more to know there were more.
    static let branchFindingLimit = 4

    let nodes: [SchemaNode]
    let limit: Int
    var path: [PathComponent]
    var depth: Int
    var findings: [Finding] = []

    var isFull: Bool { findings.count >= limit }

    /// Why a value is refused when matching a pattern against it was stopped.
    static func budgetMessage(_ pattern: CompiledPattern, _ error: RegexBudgetExceeded) -> String {
        error.cancelled
            ? "matching the pattern `\(pattern.source)` was stopped: the request was cancelled"
            : "matching the pattern `\(pattern.source)` took longer than its budget of \(Int(BoundedRegex.matchBudgetSeconds * 1000)) ms"
    }

    mutating func report(_ message: String) {
        guard !isFull else { return }
        findings.append(Finding(path: path, message: message))
    }

    mutating func reportType(expected: [JSONSchemaType], got: String) {
        guard !isFull else { return }
        let message = "expected \(Self.typeList(expected)), got \(got)"
        findings.append(Finding(path: path, message: message, typeMismatch: (expected, got)))
    }

    /// A side evaluation for a combinator branch, starting at the same place.
    func branch(limit: Int) -> Evaluation {
        Evaluation(nodes: nodes, limit: limit, path: path, depth: depth)
    }

    mutating func evaluate(_ instance: JSONValue, against index: Int) {
        guard !isFull else { return }
        guard depth < Self.maximumDepth else {
            report("is nested too deeply to validate (schema recursion deeper than \(Self.maximumDepth))")
            return
        }
        depth += 1
        defer { depth -= 1 }

        let node = nodes[index]
        if node.isFalse {
            report("no value is allowed here")
            return
        }
        // A wrong type is the root cause; the other keywords would only add
        // noise (`5 is not one of [...]`) on top of it.
        if let types = node.types, !types.contains(where: { $0.admits(instance) }) {
            reportType(expected: types, got: Self.describe(instance))
            return
        }
        if let ref = node.ref { evaluate(instance, against: ref) }
        if let values = node.enumValues, !values.contains(where: { $0.numericallyEquals(instance) }) {
            report("\(Self.brief(instance)) is not one of \(Self.brief(.array(values), limit: 300))")
        }
        if let constant = node.constValue, !constant.numericallyEquals(instance) {
            report("must be \(Self.brief(constant)), got \(Self.brief(instance))")
        }

        switch instance {
        case .string(let text): checkString(text, node)
        case .int, .double: checkNumber(instance, node)
        case .array(let items): checkArray(items, node)
        case .object(let members): checkObject(members, node)
        case .null, .bool: break
        }
        applyCombinators(instance, node)
    }

    private mutating func descend(into component: PathComponent, _ value: JSONValue, against index: Int) {
        path.append(component)
        evaluate(value, against: index)
        path.removeLast()
    }

    // MARK: Type-specific keywords

    private mutating func checkString(_ text: String, _ node: SchemaNode) {
        if node.minLength != nil || node.maxLength != nil {
            // JSON Schema counts code points, not grapheme clusters or UTF-16 units.
            let length = text.unicodeScalars.count
            if let minimum = node.minLength, length < minimum {
                report("must be at least \(Self.plural(minimum, "character")) long, got \(length)")
            }
            if let maximum = node.maxLength, length > maximum {
                report("must be at most \(Self.plural(maximum, "character")) long, got \(length)")
            }
        }
        if let pattern = node.pattern {
            do {
                if try !pattern.matches(text) {
                    report("\(Self.brief(.string(text))) does not match the pattern `\(pattern.source)`")
                }
            } catch {
                report(Self.budgetMessage(pattern, error))
            }
        }
    }

    private mutating func checkNumber(_ value: JSONValue, _ node: SchemaNode) {
        // Made only for a message: a tool call's numbers are checked at every call.
        var shown: String { Self.brief(value) }
        if let bound = node.minimum, Self.compare(value, bound) < 0 {
            report("must be >= \(Self.brief(bound)), got \(shown)")
        }
        if let bound = node.maximum, Self.compare(value, bound) > 0 {
            report("must be <= \(Self.brief(bound)), got \(shown)")
        }
        if let bound = node.exclusiveMinimum, Self.compare(value, bound) <= 0 {
            report("must be > \(Self.brief(bound)), got \(shown)")
        }
        if let bound = node.exclusiveMaximum, Self.compare(value, bound) >= 0 {
            report("must be < \(Self.brief(bound)), got \(shown)")
        }
        if let divisor = node.multipleOf, !Self.isMultiple(value, of: divisor) {
            report("must be a multiple of \(Self.brief(divisor)), got \(shown)")
        }
    }

    private mutating func checkArray(_ items: [JSONValue], _ node: SchemaNode) {
        if let minimum = node.minItems, items.count < minimum {
            report("must have at least \(Self.plural(minimum, "item")), got \(items.count)")
        }
        if let maximum = node.maxItems, items.count > maximum {
            report("must have at most \(Self.plural(maximum, "item")), got \(items.count)")
        }
        if node.uniqueItems, let (first, second) = Self.firstDuplicate(items) {
            report("items must be unique, but [\(first)] and [\(second)] are equal")
        }
        for (offset, schema) in zip(items.indices, node.prefixItems) {
            descend(into: .index(offset), items[offset], against: schema)
        }
        if let rest = node.items, items.count > node.prefixItems.count {
            if nodes[rest].isFalse {
                // Say it as a length limit rather than "no value is allowed" on each extra item.
                report("must have at most \(Self.plural(node.prefixItems.count, "item")), got \(items.count)")
            } else {
                for offset in node.prefixItems.count..<items.count {
                    descend(into: .index(offset), items[offset], against: rest)
                }
            }
        }
    }

    private mutating func checkObject(_ members: [String: JSONValue], _ node: SchemaNode) {
        for name in node.required where members[name] == nil {
            report("missing required property `\(name)`")
        }
        if let minimum = node.minProperties, members.count < minimum {
            report("must have at least \(Self.plural(minimum, "property", "properties")), got \(members.count)")
        }
        if let maximum = node.maxProperties, members.count > maximum {
            report("must have at most \(Self.plural(maximum, "property", "properties")), got \(members.count)")
        }
        for (name, dependents) in node.dependentRequired where members[name] != nil {
            for dependent in dependents where members[dependent] == nil {
                report("missing property `\(dependent)`, which is required when `\(name)` is present")
            }
        }
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            guard !isFull else { return }
            var matched = false
            if let schema = node.properties[name] {
                matched = true
                descend(into: .key(name), value, against: schema)
            }
            for (pattern, schema) in node.patternProperties {
                do {
                    guard try pattern.matches(name) else { continue }
                } catch {
                    // Not provably allowed: refused, never let through.
                    matched = true
                    report(Self.budgetMessage(pattern, error))
                    continue
                }
                matched = true
                descend(into: .key(name), value, against: schema)
            }
            guard !matched, let extra = node.additionalProperties else { continue }
            if nodes[extra].isFalse {
                report("unexpected property `\(name)`" + Self.allowedList(node))
            } else {
                descend(into: .key(name), value, against: extra)
            }
        }
    }

    // MARK: Combinators

    private mutating func applyCombinators(_ instance: JSONValue, _ node: SchemaNode) {
        for schema in node.allOf {
            evaluate(instance, against: schema)
        }
        if !node.anyOf.isEmpty {
            var failures: [(branch: Int, findings: [Finding])] = []
            for (offset, schema) in node.anyOf.enumerated() {
                var trial = branch(limit: Self.branchFindingLimit)
                trial.evaluate(instance, against: schema)
                if trial.findings.isEmpty {
                    failures.removeAll()
                    break
                }
                failures.append((offset, trial.findings))
            }
            if !failures.isEmpty { reportNoMatch(instance, node.anyOf, failures) }
        }
        if !node.oneOf.isEmpty {
            var failures: [(branch: Int, findings: [Finding])] = []
            var matches: [Int] = []
            for (offset, schema) in node.oneOf.enumerated() {
                var trial = branch(limit: Self.branchFindingLimit)
                trial.evaluate(instance, against: schema)
                if trial.findings.isEmpty {
                    matches.append(offset)
                } else {
                    failures.append((offset, trial.findings))
                }
            }
            if matches.isEmpty {
                reportNoMatch(instance, node.oneOf, failures)
            } else if matches.count > 1 {
                let forms = matches.map { String($0 + 1) }.joined(separator: ", ")
                report("matches more than one of the allowed forms (\(forms)) but must match exactly one")
            }
        }
        if let excluded = node.not {
            var trial = branch(limit: 1)
            trial.evaluate(instance, against: excluded)
            if trial.findings.isEmpty {
                report("must not match the schema at `\(nodes[excluded].location)`")
            }
        }
        if let condition = node.ifSchema {
            var trial = branch(limit: 1)
            trial.evaluate(instance, against: condition)
            if trial.findings.isEmpty {
                if let then = node.thenSchema { evaluate(instance, against: then) }
            } else if let otherwise = node.elseSchema {
                evaluate(instance, against: otherwise)
            }
        }
    }

    /// Explains an `anyOf`/`oneOf` where no branch matched, in the most
    /// specific way available: a merged type list when every branch wanted a
    /// different type; the one branch's own findings when only one branch
    /// accepts this type; otherwise a summary of each plausible branch.
    private mutating func reportNoMatch(
        _ instance: JSONValue, _ branches: [Int], _ failures: [(branch: Int, findings: [Finding])]
    ) {
        let here = path
        func isTypeMismatch(_ findings: [Finding]) -> Bool {
            findings.count == 1 && findings[0].typeMismatch != nil && findings[0].path == here
        }
        let plausible = failures.filter { !isTypeMismatch($0.findings) }
        if plausible.isEmpty {
            var merged: [JSONSchemaType] = []
            for failure in failures {
                for type in failure.findings[0].typeMismatch?.expected ?? [] where !merged.contains(type) {
                    merged.append(type)
                }
            }
            reportType(expected: merged, got: failures[0].findings[0].typeMismatch?.got ?? "")
            return
        }
        if plausible.count == 1 {
            // Re-run it here rather than copying the trial's findings: the
            // trial stopped at `branchFindingLimit`, this gets the full budget.
            evaluate(instance, against: branches[plausible[0].branch])
            return
        }
        let parts = plausible.map { failure -> String in
            let shown = failure.findings.prefix(Self.branchFindingLimit - 1).map { finding in
                finding.path == here
                    ? finding.message : "at `\(PathComponent.render(finding.path))`: \(finding.message)"
            }
            let more = failure.findings.count >= Self.branchFindingLimit ? ", …" : ""
            return "form \(failure.branch + 1): " + shown.joined(separator: ", ") + more
        }
        report("does not match any of the allowed forms; " + parts.joined(separator: "; "))
    }

    // MARK: Helpers

    /// "integer 5", "string \"7\"": scalars show their value because a model
    /// that quoted a number needs to see the quotes; containers just their type.
    private static func describe(_ instance: JSONValue) -> String {
        switch instance {
        case .array, .object, .null: return instance.typeName
        default: return "\(instance.typeName) \(brief(instance))"
        }
    }

    private static func typeList(_ types: [JSONSchemaType]) -> String {
        let names = types.map(\.rawValue)
        switch names.count {
        case 0: return "nothing (empty type list)"
        case 1: return names[0]
        default: return names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
        }
    }

    private static func allowedList(_ node: SchemaNode) -> String {
        // With patternProperties the allowed set is not a list of names, so
        // listing only the fixed ones would mislead.
        guard node.patternProperties.isEmpty else { return "" }
        let names = node.properties.keys.sorted()
        if names.isEmpty { return "; this object takes no properties" }
        let shown = names.prefix(20).map { "`\($0)`" }.joined(separator: ", ")
        return "; allowed: " + shown + (names.count > 20 ? ", …" : "")
    }

    /// Compact JSON for a message, cut short so a huge value cannot swamp it.
    static func brief(_ value: JSONValue, limit: Int = 80) -> String {
        let text = value.serializedString()
        guard text.count > limit else { return text }
        return text.prefix(limit - 1) + "…"
    }

    private static func plural(_ count: Int, _ singular: String, _ pluralForm: String? = nil) -> String {
        "\(count) " + (count == 1 ? singular : pluralForm ?? singular + "s")
    }

    /// -1, 0 or 1. Two integers compare exactly; otherwise as doubles, which
    /// can only blur integers beyond 2^53.
    private static func compare(_ lhs: JSONValue, _ rhs: JSONValue) -> Int {
        if case .int(let a) = lhs, case .int(let b) = rhs {
            return a < b ? -1 : (a == b ? 0 : 1)
        }
        let a = lhs.numberValue ?? 0
        let b = rhs.numberValue ?? 0
        return a < b ? -1 : (a == b ? 0 : 1)
    }

    private static func isMultiple(_ value: JSONValue, of divisor: JSONValue) -> Bool {
        if case .int(let a) = value, case .int(let b) = divisor, b > 0 {
            return a % b == 0
        }
        guard let a = value.numberValue, let b = divisor.numberValue, b > 0 else { return false }
        let quotient = a / b
        guard quotient.isFinite else { return false }
        // Binary doubles make 0.3 / 0.1 come out as 2.9999999999999996; a
        // small relative tolerance accepts what the author obviously meant.
        return abs(quotient - quotient.rounded()) <= 1e-9 * max(1, abs(quotient))
    }

    /// The first pair of equal items (`1` equals `1.0`). Quadratic, which is
    /// fine for argument-sized arrays and avoids inventing a canonical hash.
    private static func firstDuplicate(_ items: [JSONValue]) -> (Int, Int)? {
        for second in items.indices {
            for first in 0..<second where items[first].numericallyEquals(items[second]) {
                return (first, second)
            }
        }
        return nil
    }
}
