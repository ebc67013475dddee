// An MCP client in the guest for tests/e2e/test_mcp.py's fs server: the
// stock SDK's Client over `gantry-guest mcp-proxy`. argv[2] is a JSON list
// of [tool, path] calls, made all at once; prints one JSON line: the tools
// listed and each call's isError and text, in the list's order.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const calls = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({ command: "/dev/.gantry-guest", args: ["mcp-proxy"] });
const client = new Client({ name: "fs-test-client", version: "1.0.0" });
await client.connect(transport);
const out = { tools: (await client.listTools()).tools.map((t) => t.name).sort() };
const text = (r) => r.content.map((c) => c.text).join("");
out.calls = await Promise.all(calls.map(async ([name, path]) => {
  const r = await client.callTool({ name, arguments: { path } });
  return { isError: !!r.isError, text: text(r) };
}));
await client.close();
console.log(JSON.stringify(out));
