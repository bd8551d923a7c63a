/// Order statistics over nanosecond samples.
struct Samples {
    private(set) var sorted: [UInt64]

    init(_ values: [UInt64]) { sorted = values.sorted() }

    var count: Int { sorted.count }
    var isEmpty: Bool { sorted.isEmpty }

    /// Nearest-rank percentile, `p` in 0...100.
    func percentile(_ p: Double) -> UInt64 {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[Swift.min(Swift.max(rank, 0), sorted.count - 1)]
    }

    var median: UInt64 { percentile(50) }
    var min: UInt64 { sorted.first ?? 0 }
    var max: UInt64 { sorted.last ?? 0 }
    var mean: Double { sorted.isEmpty ? 0 : Double(sorted.reduce(0, +)) / Double(sorted.count) }
}

extension UInt64 {
    var micros: Double { Double(self) / 1_000 }
    var millis: Double { Double(self) / 1_000_000 }
    var seconds: Double { Double(self) / 1_000_000_000 }
}

extension Double {
    /// Rounded for the JSON line: figures, not noise.
    func rounded(places: Int) -> Double {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        return (self * scale).rounded() / scale
    }

    /// `1234567.8` → `"1,234,568"`.
    var grouped: String {
        let digits = String(Int(self.rounded()))
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0, i % 3 == 0, c != "-" { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    func fixed(_ places: Int) -> String {
        let r = rounded(places: places)
        var text = String(r)
        if places == 0 { return String(Int(r)) }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let fraction = parts.count > 1 ? String(parts[1]) : ""
        if fraction.count < places { text += String(repeating: "0", count: places - fraction.count) }
        return text
    }
}
