// A minimal scripted Messages API double for these tests (SSE streaming, one step per request).
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Step =
  | { text: string }
  | { tool: { name: string; input: Record<string, unknown> }; text?: string }
  | { hang: true }
  | { error: { status: number; type: string; message: string } };

export interface ModelServer {
  url: string;
  requests(): Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startScriptedServer(script: Step[]): Promise<ModelServer> {
  let next = 0;
  const reqs: Array<Record<string, unknown>> = [];
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = req.url ?? "";
      if (!url.startsWith("/v1/messages")) {
        res.writeHead(404, { "content-type": "application/json" }).end('{"type":"error","error":{"type":"not_found_error","message":"no"}}');
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>;
      if (url.includes("count_tokens")) {
        res.writeHead(200, { "content-type": "application/json" }).end('{"input_tokens":10}');
        return;
      }
      reqs.push(body);
      const step = script[Math.min(next++, script.length - 1)]!;
      if ("hang" in step) {
        hanging.add(res);
        res.writeHead(200, { "content-type": "text/event-stream" });
        return;
      }
      if ("error" in step) {
        res
          .writeHead(step.error.status, { "content-type": "application/json" })
          .end(JSON.stringify({ type: "error", error: { type: step.error.type, message: step.error.message } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const ev = (type: string, data: Record<string, unknown>): void => void res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      const id = `msg_${next}`;
      ev("message_start", { message: { id, type: "message", role: "assistant", model: body["model"], content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } });
      let index = 0;
      const text = "text" in step ? step.text : undefined;
      if (text !== undefined) {
        ev("content_block_start", { index, content_block: { type: "text", text: "" } });
        ev("content_block_delta", { index, delta: { type: "text_delta", text } });
        ev("content_block_stop", { index });
        index++;
      }
      if ("tool" in step) {
        ev("content_block_start", { index, content_block: { type: "tool_use", id: `toolu_${next}`, name: step.tool.name, input: {} } });
        ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: JSON.stringify(step.tool.input) } });
        ev("content_block_stop", { index });
      }
      ev("message_delta", { delta: { stop_reason: "tool" in step ? "tool_use" : "end_turn" }, usage: { output_tokens: 5 } });
      ev("message_stop", {});
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => reqs,
    close: () =>
      new Promise<void>((r) => {
        for (const h of hanging) h.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
