// The projector process no longer reads TURNSTREAM_PROJECTION_VERSION, TURNSTREAM_PROJECTOR_RESCAN_MS or
// TURNSTREAM_PROJECTOR_BATCH_EVENTS: set, they change nothing, and its start-up log says so once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { PROJECTION_VERSION } from "../../src/projector/index.ts";
import { rid, root } from "./_support.ts";

test("workers/projector.ts with the removed variables set: one warning naming them; it builds the built-in version", async () => {
  const child = spawn(join(root, "node_modules", ".bin", "node"), [join(root, "workers", "projector.ts")], {
    cwd: root,
    env: {
      ...process.env,
      TURNSTREAM_PREFIX: `${rid("tsremoved")}:`,
      TURNSTREAM_PROJECTION_VERSION: String(PROJECTION_VERSION + 1),
      TURNSTREAM_PROJECTOR_BATCH_EVENTS: "25",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, "exit") as Promise<[number | null]>;
  const lines: Record<string, unknown>[] = [];
  try {
    const started = new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on("line", (text) => {
        const line = JSON.parse(text) as Record<string, unknown>;
        lines.push(line);
        if (line["msg"] === "projector started") resolve(line);
      });
      void exited.then(([code]) => reject(new Error(`exited (${code}) before it started: ${stderr.slice(-500)}`)));
    });
    const startLine = await started;
    assert.equal(startLine["version"], PROJECTION_VERSION, "TURNSTREAM_PROJECTION_VERSION is not read");
    const warnings = lines.filter((line) => Array.isArray(line["removedVariables"]));
    assert.equal(warnings.length, 1, JSON.stringify(lines));
    assert.equal(warnings[0]!["level"], 40);
    assert.deepEqual(warnings[0]!["removedVariables"], [
      "TURNSTREAM_PROJECTION_VERSION",
      "TURNSTREAM_PROJECTOR_BATCH_EVENTS",
    ]);
    assert.match(
      String(warnings[0]!["msg"]),
      /TURNSTREAM_PROJECTION_VERSION \(run `turnstream projector --version N`\)/,
    );
    assert.match(String(warnings[0]!["msg"]), /TURNSTREAM_PROJECTOR_BATCH_EVENTS \(.*option batchEvents\)/);
  } finally {
    child.kill("SIGTERM");
    const [code] = await exited;
    assert.equal(code, 0, `clean exit after SIGTERM; stderr: ${stderr.slice(-500)}`);
  }
});
