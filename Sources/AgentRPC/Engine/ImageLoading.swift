import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Image attachments given as `{path}` are read from disk when a request is
/// built. The path is the client's, so the read is bounded: a FIFO or a device
/// (`/dev/zero`) named `x.png` must not block the session or fill memory.
enum ImageLoading {
    /// The largest image file read from a path (docs/protocol.md §8).
    static let maximumFileBytes = 20 * 1024 * 1024

    enum ReadFailure: Error {
        case unreadable, notRegularFile, tooLarge
    }

    static func mimeType(forPath path: String) -> String? {
        switch path.pathExtension.lowercased() {
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        default: return nil
        }
    }

    /// Opens `path` if it is a regular file of at most `maximumFileBytes`. Opened
    /// non-blocking, so a FIFO nobody writes to answers at once; type and size are
    /// checked on the open descriptor, so a file swapped after the check is caught.
    /// The caller closes the descriptor.
    private static func openRegularFile(_ path: String) -> Result<(fd: Int32, size: Int), ReadFailure> {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .failure(.unreadable) }
        var info = stat()
        let failure: ReadFailure?
        if fstat(fd, &info) != 0 {
            failure = .unreadable
        } else if (info.st_mode & S_IFMT) != S_IFREG {
            failure = .notRegularFile
        } else if info.st_size < 0 || info.st_size > maximumFileBytes {
            failure = .tooLarge
        } else {
            failure = nil
        }
        if let failure {
            close(fd)
            return .failure(failure)
        }
        return .success((fd, Int(info.st_size)))
    }

    /// Why `path` cannot be sent as an image, without reading it; nil when it can.
    static func check(_ path: String) -> ReadFailure? {
        switch openRegularFile(path) {
        case .success(let file):
            close(file.fd)
            return nil
        case .failure(let failure):
            return failure
        }
    }

    /// The bytes of a regular file of at most `maximumFileBytes`.
    static func readFile(_ path: String) -> Result<[UInt8], ReadFailure> {
        let file: (fd: Int32, size: Int)
        switch openRegularFile(path) {
        case .success(let opened): file = opened
        case .failure(let failure): return .failure(failure)
        }
        defer { close(file.fd) }
        // One byte more than the size, so a file that grew since fstat is noticed
        // (and refused: what it holds now is not what was checked).
        var bytes = [UInt8](repeating: 0, count: file.size + 1)
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return read(file.fd, base + filled, buffer.count - filled)
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            filled += n
        }
        guard filled <= file.size else { return .failure(.unreadable) }
        bytes.removeLast(bytes.count - filled)
        return .success(bytes)
    }

    /// The image as sent to a model; nil when it can no longer be read (a file
    /// removed or replaced since the send was checked).
    static func load(_ image: ImageAttachment) -> ModelImage? {
        switch image {
        case .path(let path):
            guard let mime = mimeType(forPath: path), case .success(let bytes) = readFile(path) else { return nil }
            return .data(bytes: bytes, mimeType: mime)
        case .url(let url):
            return .url(url)
        case .data(let base64, let mime):
            guard let data = Data(base64Encoded: base64) else { return nil }
            return .data(bytes: Array(data), mimeType: mime)
        }
    }
}
