// Through the real OTLP exporters to a loopback receiver: secrets planted in a tool input, a tool's
// error output, an API error message and CLI stderr never reach the wire (http/json and
// http/protobuf), while tool names and error kinds do. The lines come from the real CLI.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ObservedEvent } from "../../src/events/index.ts";
import { createScrubber, startTelemetry } from "../../src/telemetry/index.ts";
import { hermeticEnv, pinnedClaudeBin, startModelServer } from "../../src/testing/index.ts";
import { data, startSpans } from "./attempt-spans.ts";
import { startOtlpReceiver } from "./otlp-receiver.ts";

const SECRET = `pl4nted-${randomBytes(12).toString("hex")}`;

async function runCli(responses: unknown[]): Promise<string[]> {
  const server = await startModelServer({ script: { responses } });
  const hermetic = hermeticEnv({ baseUrl: server.url, sandboxed: true, maxRetries: 0 });
  const cwd = mkdtempSync(join(tmpdir(), "ts-spans-wire-"));
  try {
    const child = spawn(
      pinnedClaudeBin(),
      ["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"],
      {
        cwd,
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...hermetic.env },
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    child.stdin.end("Go.");
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.resume();
    await new Promise((resolve) => child.on("close", resolve));
    return out.split("\n").filter((l) => l.trim() !== "");
  } finally {
    await server.close();
    hermetic.cleanup();
    rmSync(cwd, { recursive: true, force: true });
  }
}

function envelopes(lines: string[], turn: string, extra: Array<{ kind: string; data: unknown }> = []): ObservedEvent[] {
  let now = Date.parse("2026-03-02T08:00:00.000Z");
  const at = (): string => new Date((now += 5)).toISOString();
  const base = { session: "wire-sess", turn, attempt: 1, epoch: 1 };
  return [
    { ...base, kind: "attempt.started", at: at(), data: data.started(1) },
    ...lines.map((raw) => ({ ...base, kind: "cli.line", at: at(), data: { raw } })),
    ...extra.map((e) => ({ ...base, ...e, at: at() })),
    { ...base, kind: "cli.exit", at: at(), data: data.exit(0) },
    { ...base, kind: "turn.finished", at: at(), data: data.finished(1) },
  ];
}

const receiver = await startOtlpReceiver();
after(() => receiver.close());

test("planted secrets stay off the wire; tool names and error kinds arrive", async () => {
  const toolRun = await runCli([
    {
      content: [
        { type: "tool_use", name: "Bash", input: { command: `echo ${SECRET}`, description: "print the token" } },
      ],
    },
    {
      content: [
        {
          type: "tool_use",
          name: "Bash",
          input: { command: `echo ${SECRET} >&2; exit 2`, description: "fail loudly" },
        },
      ],
    },
    { content: [{ type: "text", text: "done" }] },
  ]);
  const apiRun = await runCli([
    { error: { status: 429, type: "rate_limit_error", message: `quota exceeded for key ${SECRET}` } },
  ]);
  // The secret really is in what the CLI printed: in the tool input, the failing tool's output, the API error.
  assert.ok(toolRun.some((l) => l.includes('"type":"tool_use"') && l.includes(SECRET)));
  assert.ok(toolRun.some((l) => l.includes('"is_error":true') && l.includes(SECRET)));
  assert.ok(apiRun.some((l) => l.includes('"type":"result"') && l.includes(SECRET)));

  for (const protocol of ["http/json", "http/protobuf"] as const) {
    const scrubber = createScrubber({ values: { PLANTED: SECRET } });
    const telemetry = startTelemetry({
      scrubber,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        OTEL_SERVICE_NAME: "spans-wire",
      },
    });
    assert.equal(telemetry.enabled, true);
    const runs = [
      envelopes(toolRun, "turn-tools", [{ kind: "cli.stderr", data: { text: `warning: retrying with ${SECRET}` } }]),
      envelopes(apiRun, "turn-api"),
    ];
    const traceIds: string[] = [];
    for (const envs of runs) {
      const first = envs[0]!;
      // captureContent on: arguments and error texts are recorded, so only scrubbing keeps the secret out.
      const attemptSpans = startSpans({
        tracer: telemetry.tracer,
        scrubber,
        session: first.session,
        turn: first.turn,
        startedAt: first.at,
        captureContent: true,
      });
      traceIds.push(attemptSpans.trace.traceId);
      for (const envelope of envs) attemptSpans.onEvent(envelope);
    }
    const before = receiver.requests.length;
    await telemetry.forceFlush();
    await telemetry.shutdown();
    const bodies = receiver.requests.slice(before).filter((r) => r.path === "/v1/traces");
    assert.ok(bodies.length >= 1, `${protocol}: spans were exported`);
    const text = bodies.map((r) => r.bodyText).join("\n");
    assert.equal(text.includes(SECRET), false, `${protocol}: the planted secret is not on the wire`);
    assert.ok(text.includes("[REDACTED:PLANTED]"), `${protocol}: it was there, redacted`);
    for (const want of [
      "invoke_agent claude-code",
      "execute_tool Bash",
      "Bash",
      "tool_error",
      "rate_limit",
      "gen_ai.tool.call.arguments",
      "cli.stderr",
    ]) {
      assert.ok(text.includes(want), `${protocol}: ${want} reaches the wire`);
    }
    if (protocol === "http/json") {
      const spans = bodies.flatMap((body) =>
        (
          (
            body.json as {
              resourceSpans: Array<{
                scopeSpans: Array<{
                  spans: Array<{
                    name: string;
                    traceId: string;
                    status?: { code?: number; message?: string };
                    attributes: Array<{ key: string; value: { stringValue?: string } }>;
                  }>;
                }>;
              }>;
            }
          ).resourceSpans ?? []
        ).flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)),
      );
      const attr = (s: (typeof spans)[number], k: string): string | undefined =>
        s.attributes.find((a) => a.key === k)?.value.stringValue;
      const apiRoot = spans.find(
        (s) => s.name === "invoke_agent claude-code" && attr(s, "turnstream.turn") === "turn-api",
      );
      assert.ok(apiRoot);
      assert.equal(attr(apiRoot, "error.type"), "rate_limit");
      assert.match(apiRoot.status?.message ?? "", /quota exceeded for key \[REDACTED:PLANTED\]/);
      const failed = spans.find((s) => s.name === "execute_tool Bash" && attr(s, "error.type") === "tool_error");
      assert.ok(failed);
      assert.match(failed.status?.message ?? "", /\[REDACTED:PLANTED\]/);
      assert.deepEqual(new Set(spans.map((s) => s.traceId)), new Set(traceIds));
    }
  }
});
