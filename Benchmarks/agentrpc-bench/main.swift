import AgentRPCProtocol

