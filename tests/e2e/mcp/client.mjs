// An MCP client in the guest for tests/e2e/test_mcp.py: the stock SDK's
// Client over stdio, its server `gantry-guest mcp-proxy` (the gateway's
// guest end). Prints one JSON line with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const out = {};
const transport = new StdioClientTransport({ command: "/dev/.gantry-guest", args: ["mcp-proxy"] });
const client = new Client({ name: "test-client", version: "1.0.0" });
await client.connect(transport);
out.server = client.getServerVersion()?.name;
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const text = (r) => r.content.map((c) => c.text).join("");
out.echo = text(await client.callTool({ name: "remote__echo", arguments: { text: "hi there" } }));
out.whoami = text(await client.callTool({ name: "remote__whoami", arguments: {} }));
for (const name of ["remote__delete_all", "remote__auth_status"]) {
  try {
    const r = await client.callTool({ name, arguments: {} });
    out[name] = r.isError ? `error: ${text(r)}` : `allowed: ${text(r)}`;
  } catch (e) {
    out[name] = `refused: ${e.message}`;
  }
}
out.env = process.env.MCP_TEST_TOKEN ?? null;
await client.close();
console.log(JSON.stringify(out));
