import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// Every method the protocol declares for the client to send has a handler in
/// the server, and the server serves nothing it does not declare.
@Suite struct MethodServedTests {
    @Test func everyDeclaredClientMethodIsServed() throws {
        let input = Pipe(), output = Pipe()
        var options = ServerOptions()
        options.ephemeral = true
        let server = try Server(options: options, inputFD: input.fileHandleForReading.fileDescriptor, outputFD: output.fileHandleForWriting.fileDescriptor)
        let served = server.dispatcher.servedMethods
        let requests = MethodRegistry.requests.filter { $0.direction == .clientToServer }.map { $0.name }
        let notifications = MethodRegistry.notifications.filter { $0.direction == .clientToServer }.map { $0.name }
        let unservedRequests = requests.filter { !served.requests.contains($0) }
        let unservedNotifications = notifications.filter { !served.notifications.contains($0) }
        #expect(unservedRequests.isEmpty, "declared requests without a handler: \(unservedRequests)")
        #expect(unservedNotifications.isEmpty, "declared notifications without a handler: \(unservedNotifications)")
        let undeclared = served.requests.filter { !requests.contains($0) } + served.notifications.filter { !notifications.contains($0) }
        #expect(undeclared.isEmpty, "handlers for methods MethodRegistry does not list: \(undeclared)")
        #expect(server.dispatcher.methodsRegisteredTwice.isEmpty, "methods given two handlers: \(server.dispatcher.methodsRegisteredTwice)")
        withExtendedLifetime((input, output)) {}
    }

    @Test func lifecycleIsDeclaredPerMethod() {
        #expect(MethodRegistry.lifecycle(of: "initialize") == .first)
        #expect(MethodRegistry.lifecycle(of: "exit") == .always)
        #expect(MethodRegistry.lifecycle(of: "session/getState") == .runningAndAfterShutdown)
        #expect(MethodRegistry.lifecycle(of: "session/send") == .running)
        #expect(MethodRegistry.lifecycle(of: "tool/call") == nil)
        #expect(MethodRegistry.lifecycle(of: "no/such") == nil)
        let afterShutdown = MethodRegistry.requests.filter { $0.direction == .clientToServer && $0.lifecycle.afterShutdown }.map { $0.name }.sorted()
        #expect(afterShutdown == ["session/close", "session/getMedia", "session/getState", "session/getTranscript", "session/list", "shutdown"])
    }
}
