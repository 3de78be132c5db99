// A minimal stdio MCP server for the supervised-mode tests: one tool, `touch`, that creates the file
// named by `path` (so a test can tell whether an MCP call ran). Newline-delimited JSON-RPC 2.0.
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const TOOL = {
  name: "touch",
  description: "Creates a file",
  inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
};

createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id === undefined) return;
  if (m.method === "initialize") {
    return send({
      jsonrpc: "2.0",
      id: m.id,
      result: {
        protocolVersion: m.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "probe", version: "1.0.0" },
      },
    });
  }
  if (m.method === "tools/list") return send({ jsonrpc: "2.0", id: m.id, result: { tools: [TOOL] } });
  if (m.method === "tools/call") {
    writeFileSync(m.params.arguments.path, "x");
    return send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "touched" }] } });
  }
  send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no such method" } });
});
