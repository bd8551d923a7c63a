import Testing
@testable import AgentRPC

