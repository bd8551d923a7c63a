/// A streamed delta's whole notification frame (`{"jsonrpc":"2.0","method":
/// "session/event","params":{"event":{"delta":…}…}}` and its newline), written
/// into one buffer reused from delta to delta: what comes before the text,
/// between the text and `seq`, and after `seq` is the same for every delta of
/// a turn and is copied in whole; only the text and `seq` are written per
/// delta. The bytes are those of `SessionEventParams.writeDelta` inside the
/// envelope `frameHead` … `frameEnd`.
///
/// For one owner on one thread (a session's events): not `Sendable`.
package final class DeltaFrameWriter {
    /// The envelope up to the params, then the params up to the delta's text.
    private let opening: Piece
    private let textClosing: Piece
    private let reasoningClosing: Piece
    /// The params after `seq` (`SessionEventParams.tail`), then the envelope's end.
    private let ending: Piece
    private var buffer: UnsafeMutablePointer<UInt8>
    private var capacity: Int

    /// Constant bytes, copied once into memory of their own.
    private struct Piece {
        let start: UnsafeMutablePointer<UInt8>
        let count: Int

        init(_ parts: [UInt8]...) {
            let bytes = parts.flatMap { $0 }
            count = bytes.count
            start = .allocate(capacity: max(count, 1))
            start.initialize(from: bytes, count: count)
        }

        /// Copies the piece to `p`; returns its length.
        @inline(__always) func write(to p: UnsafeMutablePointer<UInt8>) -> Int {
            p.update(from: start, count: count)
            return count
        }

        func free() { start.deallocate() }
    }

    /// The buffer's size when it is made, and the most it keeps after a frame
    /// that needed more (a long held-back delta).
    static let keptCapacity = 4096
    static let largestKeptCapacity = 1 << 16

    /// `frameHead`: a notification's envelope up to its params; `tail`:
    /// `SessionEventParams.tail` of the turn; `frameEnd`: what closes the
    /// envelope and frames it.
    package init(frameHead: [UInt8], tail: [UInt8], frameEnd: [UInt8]) {
        opening = Piece(frameHead, Self.bytes(SessionEventParams.deltaOpening))
        textClosing = Piece(Self.bytes(SessionEventParams.deltaClosing(reasoning: false)))
        reasoningClosing = Piece(Self.bytes(SessionEventParams.deltaClosing(reasoning: true)))
        ending = Piece(tail, frameEnd)
        capacity = Self.keptCapacity
        buffer = .allocate(capacity: capacity)
    }

    deinit {
        buffer.deallocate()
        opening.free()
        textClosing.free()
        reasoningClosing.free()
        ending.free()
    }

    private static func bytes(_ literal: StaticString) -> [UInt8] {
        Array(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// The frame of one delta: valid until the next call or the writer's end.
    package func frame(_ text: String, reasoning: Bool, seq: Int) -> UnsafeBufferPointer<UInt8> {
        let closing = reasoning ? reasoningClosing : textClosing
        // The most the frame can take: every byte of text escaped as `\u00XX`, 21 for `seq`.
        let most = opening.count + text.utf8.count * JSONTextWriter.maximumEscapedBytesPerByte + closing.count + 21 + ending.count
        if most > capacity || (capacity > Self.largestKeptCapacity && most <= Self.keptCapacity) {
            buffer.deallocate()
            capacity = max(most, Self.keptCapacity)
            buffer = .allocate(capacity: capacity)
        }
        var n = opening.write(to: buffer)
        n += JSONTextWriter.writeStringContents(text, to: buffer + n)
        n += closing.write(to: buffer + n)
        n += JSONTextWriter.writeInt(seq, to: buffer + n)
        n += ending.write(to: buffer + n)
        return UnsafeBufferPointer(start: buffer, count: n)
    }
}
