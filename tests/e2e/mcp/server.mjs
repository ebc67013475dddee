// A remote MCP server for tests/e2e/test_mcp.py: the stock SDK's
// McpServer over streamable HTTP on 127.0.0.1, which refuses a request
// without a bearer it was given and records every Authorization it
// received. Tools: echo (its text back), whoami (the Authorization it got:
// a remote that leaks the credential), delete_all (which the test denies),
// auth_status (which the gateway refuses by itself).
//   node server.mjs PORT TOKEN[,TOKEN...] LOGFILE
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const [port, tokens, log] = process.argv.slice(2);
const bearers = new Set(tokens.split(",").map((t) => `Bearer ${t}`));
const transports = new Map();

function newServer(auth) {
  const s = new McpServer({ name: "test-remote", version: "1.0.0" });
  s.tool("echo", "Echo the text", { text: z.string() },
    async ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }));
  s.tool("whoami", "The Authorization header this server got", {},
    async () => ({ content: [{ type: "text", text: `you sent: ${auth()}` }] }));
  s.tool("delete_all", "Delete everything", {},
    async () => ({ content: [{ type: "text", text: "deleted" }] }));
  s.tool("auth_status", "The session's credential", {},
    async () => ({ content: [{ type: "text", text: auth() }] }));
  return s;
}

createServer(async (req, res) => {
  const got = req.headers["authorization"] || "";
  appendFileSync(log, `${got}\n`);
  if (!bearers.has(got)) {
    res.writeHead(401).end("unauthorized");
    return;
  }
  let body = "";
  for await (const chunk of req) body += chunk;
  const msg = body ? JSON.parse(body) : undefined;
  const sid = req.headers["mcp-session-id"];
  let t = sid && transports.get(sid);
  if (!t) {
    t = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => transports.set(id, t),
    });
    await newServer(() => got).connect(t);
  }
  await t.handleRequest(req, res, msg);
}).listen(Number(port), "127.0.0.1", () => console.log("listening"));
