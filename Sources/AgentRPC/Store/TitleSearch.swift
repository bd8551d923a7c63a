/// `session/list`'s `query`: whether a title contains the query, ignoring case and
/// diacritics ("cafe" finds "Café", "STRASSE" finds "Straße").
///
/// Both sides are decomposed (NFD), case-folded (Unicode full folding) and stripped of
/// their combining marks, by ICU (loaded at the first non-ASCII search), then compared
/// code unit by code unit; ASCII on both sides needs no ICU. Foundation's
/// `range(of:options: [.caseInsensitive, .diacriticInsensitive])` did this before
/// with its own tables; docs/protocol.md says where the two may differ.
enum TitleSearch {
    static func contains(_ title: String, _ query: String) -> Bool {
        if query.utf8.allSatisfy({ $0 < 0x80 }) && title.utf8.allSatisfy({ $0 < 0x80 }) {
            return contains(Array(title.utf8).map(lowerASCII), Array(query.utf8).map(lowerASCII))
        }
        if case .success(let icu) = ICU.shared, let t = folded(title, icu), let q = folded(query, icu) {
            return contains(t, q)
        }
        // No ICU: case only, as the standard library lowercases.
        return contains(Array(title.lowercased().utf16), Array(query.lowercased().utf16))
    }

    private static func lowerASCII(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    /// NFD, folded, without combining marks, in UTF-16.
    private static func folded(_ text: String, _ icu: ICU) -> [UInt16]? {
        guard let units = icu.foldedDecomposition(Array(text.utf16)) else { return nil }
        let scalars = String(decoding: units, as: UTF16.self).unicodeScalars.filter { $0.properties.generalCategory != .nonspacingMark }
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars)
        return Array(String(out).utf16)
    }

    private static func contains<T: Equatable>(_ haystack: [T], _ needle: [T]) -> Bool {
        guard !needle.isEmpty else { return true }
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
