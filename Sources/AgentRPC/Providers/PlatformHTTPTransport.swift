import Foundation

/// The platform's HTTP client: plain `http://` through `PlainHTTPClient`;
/// `https://` through libcurl (`CurlTransport`) on Linux, and URLSession
/// otherwise or when libcurl cannot be loaded.
struct PlatformHTTPTransport: HTTPTransport {
    func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle {
        if let target = PlainHTTPClient.target(of: request.url) {
            // Plain http (local servers): our own client, which waits without a busy core.
            let task = PlainHTTPClient.start(request, target: target, sink: sink)
            return HTTPRequestHandle(cancel: { task.cancel() }, linger: { task.linger() })
        }
        #if os(Linux)
        // https on Linux: libcurl's easy interface, which waits without a busy core.
        if let task = CurlTransport.start(request, sink: sink) {
            return HTTPRequestHandle(cancel: { task.cancel() }, linger: { task.linger() })
        }
        #endif
        return URLSessionTransport().start(request, sink: sink)
    }
}
