// A session that uses the tools of an MCP server (docs/protocol.md §18).
//
// The server is a few lines of stdlib Python speaking MCP on stdio; any MCP
// server is named the same way (`{ name, command, args, env }`). The offline
// scripted provider stands in for the model and calls `mcp__calc__add`.
import { Client, scripted } from '../../clients/node/src/index.js';

const CALC_SERVER = `
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}, "annotations": {"readOnlyHint": True}}]}
    elif m["method"] == "tools/call":
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a["a"] + a["b"])}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
`;

const client = await Client.spawn();
try {
  const session = await client.openSession({
    model: scripted({ toolCalls: [{ name: 'mcp__calc__add', arguments: { a: 2, b: 40 } }] }, { text: ['2 + 40 = 42.'] }),
    mcpServers: [{ name: 'calc', command: 'python3', args: ['-c', CALC_SERVER] }],
  });
  for await (const event of session.stream('What is 2 + 40?')) {
    if (event.type === 'toolCallFinished') console.log(`${event.name} (MCP server ${event.source.mcp}) -> ${JSON.stringify(event.content)}`);
  }
  const state = await session.getState();
  for (const server of state.mcpServers) console.log(`server ${server.name}: ${server.status}, tools ${server.tools.join(', ')}`);
} finally {
  await client.close();
}
