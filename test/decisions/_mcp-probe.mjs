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
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (message.id === undefined) return;
  if (message.method === "initialize") {
    return send({
      jsonrpc: "2.0",
      id: message.id,
      result: {
        protocolVersion: message.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "probe", version: "1.0.0" },
      },
    });
  }
  if (message.method === "tools/list") return send({ jsonrpc: "2.0", id: message.id, result: { tools: [TOOL] } });
  if (message.method === "tools/call") {
    writeFileSync(message.params.arguments.path, "x");
    return send({ jsonrpc: "2.0", id: message.id, result: { content: [{ type: "text", text: "touched" }] } });
  }
  send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no such method" } });
});
