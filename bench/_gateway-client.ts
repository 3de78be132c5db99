// The gateway bench's client, in a process of its own as the CLI is: streaming Messages requests
// alternating straight to the model server and through the gateway, each timed to its answer's first
// body byte, after priming rounds. Reads GW_DIRECT, GW_GATEWAY, GW_TOKEN and GW_REQUESTS from its env; prints one JSON
// line.
import { request } from "node:http";

const direct = process.env["GW_DIRECT"]!;
const gateway = process.env["GW_GATEWAY"]!;
const token = process.env["GW_TOKEN"]!;
const requests = Number(process.env["GW_REQUESTS"] ?? 300);
// A request the size of a CLI turn's (system prompt, tools, messages: tens of KiB).
const body = JSON.stringify({
  model: "claude-sonnet-4-5",
  stream: true,
  max_tokens: 64,
  system: "s".repeat(24_000),
  tools: [{ name: "Bash", description: "d".repeat(8000) }],
  messages: [{ role: "user", content: "say done" }],
});

function ttfb(base: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const headers = {
      "x-api-key": token,
      "content-type": "application/json",
      "anthropic-version": "2023-06-01",
      "content-length": Buffer.byteLength(body),
    };
    const req = request(`${base}/v1/messages?beta=true`, { method: "POST", headers }, (res) => {
      let first: number | undefined;
      res.on("data", () => (first ??= performance.now() - t0));
      res.on("end", () => resolve(first ?? Number.NaN));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// Priming (JIT, connections) not counted; "ready" tells the gateway's process to start its CPU clock.
for (let priming = 0; priming < 50; priming++) for (const base of [gateway, direct]) await ttfb(base);
process.stdout.write("ready\n");
const out: { direct: number[]; gateway: number[] } = { direct: [], gateway: [] };
for (let round = 0; round < requests; round++) {
  for (const way of (round % 2 === 0 ? ["gateway", "direct"] : ["direct", "gateway"]) as Array<"direct" | "gateway">) {
    out[way].push(await ttfb(way === "direct" ? direct : gateway));
  }
}
process.stdout.write(JSON.stringify(out) + "\n");
