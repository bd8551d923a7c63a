#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// What Foundation's `String` extensions did for the binary, written on the standard
// library so no module needs Foundation (which loads ICU at start-up on Linux).
// Each gives the same result as the Foundation call it replaces (pinned by
// PortabilityTests against Foundation).

extension Unicode.Scalar {
    /// Foundation's `CharacterSet.whitespaces`: the space separators (Zs), the tab, and
    /// the zero-width space U+200B, which Foundation counts too.
    package var isFoundationWhitespace: Bool {
        value == 0x09 || value == 0x200B || properties.generalCategory == .spaceSeparator
    }

    /// Foundation's `CharacterSet.whitespacesAndNewlines`: the above, U+000A–U+000D,
    /// U+0085 and the line and paragraph separators.
    package var isFoundationWhitespaceOrNewline: Bool {
        isFoundationWhitespace || (0x0A...0x0D).contains(value) || value == 0x85 || value == 0x2028 || value == 0x2029
    }

    /// Whether this scalar belongs to the character before it (a combining mark, a
    /// variation selector): Foundation's searches never end a match before one.
    fileprivate var extendsPrevious: Bool {
        properties.isGraphemeExtend || properties.generalCategory == .spacingMark
    }
}

extension StringProtocol {
    /// `trimmingCharacters(in: .whitespaces)`.
    package func trimmingWhitespace() -> String { trimmingScalars(where: \.isFoundationWhitespace) }

    /// `trimmingCharacters(in: .whitespacesAndNewlines)`.
    package func trimmingWhitespaceAndNewlines() -> String { trimmingScalars(where: \.isFoundationWhitespaceOrNewline) }

    /// `trimmingCharacters(in:)` for the set of scalars `drop` accepts.
    package func trimmingScalars(where drop: (Unicode.Scalar) -> Bool) -> String {
        let scalars = Substring(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !drop($0) }), let last = scalars.lastIndex(where: { !drop($0) }) else { return "" }
        // Sliced by scalars: a Character-level slice would round an index inside a
        // Character (" \u{301}" trimmed) down to the Character's start.
        return String(Substring(scalars[first...last]))
    }

    /// Whether the text contains `target`, as `scalarRange(of:)` finds it.
    package func containsScalars(_ target: some StringProtocol) -> Bool { scalarRange(of: target) != nil }

    /// The first range of `target` in the text, compared scalar by scalar as Foundation's
    /// `range(of:)` does for text without canonically equivalent spellings: unlike the
    /// standard library's `firstRange(of:)`, "\n" is found inside "\r\n"; like Foundation,
    /// a match is not taken when a combining mark follows it ("e" is not found in "e\u{301}").
    /// The bounds may fall inside a Character ("\r|\n"): slice with them through
    /// `unicodeScalars`, as a Character-level slice rounds them down.
    package func scalarRange(of target: some StringProtocol) -> Range<Index>? {
        let scalars = Substring(self).unicodeScalars
        let needle = Array(target.unicodeScalars)
        guard let head = needle.first else { return nil }
        var start = scalars.startIndex
        while let candidate = scalars[start...].firstIndex(of: head) {
            var i = candidate
            var matched = true
            for scalar in needle {
                guard i < scalars.endIndex, scalars[i] == scalar else { matched = false; break }
                i = scalars.index(after: i)
            }
            if matched && (i == scalars.endIndex || !scalars[i].extendsPrevious) { return candidate..<i }
            start = scalars.index(after: candidate)
        }
        return nil
    }

    /// `replacingOccurrences(of:with:)`: every match of `target` (as `scalarRange(of:)`
    /// finds them, left to right, not overlapping) replaced by `replacement`.
    package func replacingScalars(of target: some StringProtocol, with replacement: some StringProtocol) -> String {
        var out = String.UnicodeScalarView()
        var rest = Substring(self)
        while let range = rest.scalarRange(of: target) {
            out.append(contentsOf: rest.unicodeScalars[..<range.lowerBound])
            out.append(contentsOf: replacement.unicodeScalars)
            rest = Substring(rest.unicodeScalars[range.upperBound...])
        }
        out.append(contentsOf: rest.unicodeScalars)
        return String(out)
    }
}

extension String {
    /// `String(format:)` for C's numeric conversions (`%.1f`, `%.6g`, `%d` …), which
    /// Foundation formats with the C library's own `printf` too.
    package init(cFormat format: String, _ arguments: any CVarArg...) {
        self = withVaList(arguments) { list in
            var buffer = [CChar](repeating: 0, count: 64)
            let needed = Int(vsnprintf(&buffer, buffer.count, format, list))
            if needed >= buffer.count {
                buffer = [CChar](repeating: 0, count: needed + 1)
                _ = withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) }
            }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

/// Writes to a file descriptor without Foundation's `FileHandle`.
package enum FileDescriptorOutput {
    /// Writes all of `bytes` to `fd`, retrying short writes and interruptions; false on
    /// an error (a closed pipe, a full disk), where `FileHandle.write` would have trapped.
    @discardableResult
    package static func write(_ fd: Int32, _ bytes: some Collection<UInt8>) -> Bool {
        let written: Bool? = bytes.withContiguousStorageIfAvailable { writeAll(fd, UnsafeRawBufferPointer($0)) }
        if let written { return written }
        return Array(bytes).withUnsafeBytes { writeAll(fd, $0) }
    }

    /// Writes `text` as UTF-8 to the standard error.
    @discardableResult
    package static func standardError(_ text: String) -> Bool { write(2, Array(text.utf8)) }

    /// Writes `text` as UTF-8 to the standard output.
    @discardableResult
    package static func standardOutput(_ text: String) -> Bool { write(1, Array(text.utf8)) }

    private static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        guard var address = buffer.baseAddress else { return true }
        var left = buffer.count
        while left > 0 {
            let n = cWrite(fd, address, left)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            address += n
            left -= n
        }
        return true
    }
}

/// The C library's `write(2)`, named so the static method above does not shadow it.
private func cWrite(_ fd: Int32, _ address: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, address, count)
}

extension StringProtocol {
    /// `removingPercentEncoding`: each "%" and two hex digits made the byte they name;
    /// nil when a "%" is not followed by two hex digits or the bytes are not UTF-8.
    package var percentDecoded: String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var i = utf8.startIndex
        while i < utf8.endIndex {
            let byte = utf8[i]
            i = utf8.index(after: i)
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard i < utf8.endIndex, let high = Self.hexValue(utf8[i]) else { return nil }
            i = utf8.index(after: i)
            guard i < utf8.endIndex, let low = Self.hexValue(utf8[i]) else { return nil }
            i = utf8.index(after: i)
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

