// Entry point: wiring only. See AgentRPC for the server.
import AgentRPC

