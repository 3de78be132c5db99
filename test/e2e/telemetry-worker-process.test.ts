// A worker process with OTEL_* set: its attempt spans reach a real OTLP/HTTP receiver (flushed on
// SIGTERM by the shutdown), and a secret from its environment that the Bash tool prints is in
// neither the spans, its log lines nor the event log.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { ATTEMPT_SPAN_NAME, redactionMarker, toolSpanName } from "../../src/telemetry/index.ts";
import { startOtlpReceiver } from "../telemetry/otlp-receiver.ts";
import { processFleet, readAll } from "../worker/_support.ts";

test("worker process: spans exported over OTLP from OTEL_* env, flushed on SIGTERM; env secret scrubbed everywhere", async () => {
  const secret = `cnryproc${randomBytes(8).toString("hex")}`;
  const receiver = await startOtlpReceiver();
  const fleet = await processFleet({
    responses: [
      {
        content: [
          { type: "tool_use", name: "Bash", input: { command: 'echo "token=$DEPLOY_TOKEN"', description: "print" } },
        ],
      },
      { content: [{ type: "text", text: "ok" }] },
    ],
  });
  const { server, producer, ws } = fleet;
  try {
    const worker = await fleet.start("a", {
      DEPLOY_TOKEN: secret,
      TURNSTREAM_RUN_ENV: "DEPLOY_TOKEN",
      TURNSTREAM_SANDBOXED: "1",
      TURNSTREAM_SHUTDOWN_GRACE_MS: "5000",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      LOG_LEVEL: "debug",
    });
    // The operator passes DEPLOY_TOKEN to every run (TURNSTREAM_RUN_ENV), so the Bash tool sees it without a reference.
    const queued = await producer.enqueueTurn({ prompt: "print it", cwd: ws, options: { skipPermissions: true } });
    const res = await producer.waitForTurn(queued.turn, { timeoutMs: 20_000 }).catch((err: unknown) => {
      throw new Error(
        `${(err as Error).message}; worker log: ${worker.lines
          .slice(-8)
          .map((l) => JSON.stringify(l))
          .join("\n")}`,
      );
    });
    assert.equal(res.status, "finished", JSON.stringify(res.event.data));
    assert.ok(
      JSON.stringify(server.requests().map((q) => q.messages)).includes(`token=${secret}`),
      "the CLI printed the secret",
    );
    worker.kill("SIGTERM");
    const exit = await worker.exited;
    assert.equal(exit.code, 0);

    const names = receiver.jsonSpanNames();
    assert.ok(names.includes(ATTEMPT_SPAN_NAME) && names.includes(toolSpanName("Bash")), names.join(", "));
    const events = (await readAll(producer.log, queued.session)).filter((e) => e.kind !== "session.snapshot");
    assert.ok(JSON.stringify(events).includes(`token=${redactionMarker("DEPLOY_TOKEN")}`));
    const sinks = [
      ...receiver.requests.map((q) => q.bodyText),
      ...worker.lines.map((l) => JSON.stringify(l)),
      JSON.stringify(events),
    ];
    assert.equal(sinks.filter((s) => s.includes(secret)).length, 0);
  } finally {
    await fleet.dispose();
    await receiver.close();
  }
});
