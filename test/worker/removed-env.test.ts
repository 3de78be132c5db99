// Variables that are no longer read: a worker that finds any set starts as before and says so in one
// warning naming each, with what to do instead, so a setting that no longer applies is not silently ignored.
import { test } from "node:test";
import assert from "node:assert/strict";
import { REMOVED_ENV_VARS, warnRemovedEnvVars, type Logger } from "../../src/telemetry/index.ts";
import { processFleet } from "./_support.ts";

function recordingLogger(): { logger: Logger; warnings: { fields: object | string; msg?: string }[] } {
  const warnings: { fields: object | string; msg?: string }[] = [];
  const ignore = (): void => {};
  return {
    warnings,
    logger: { debug: ignore, info: ignore, error: ignore, warn: (fields, msg) => warnings.push({ fields, msg }) },
  };
}

test("warnRemovedEnvVars: nothing when none is set; one warning naming each one set, empty ones too", () => {
  const quiet = recordingLogger();
  warnRemovedEnvVars({ TURNSTREAM_WARM: "1", TURNSTREAM_CONCURRENCY: "2" }, quiet.logger);
  assert.equal(quiet.warnings.length, 0);

  const noisy = recordingLogger();
  warnRemovedEnvVars({ TURNSTREAM_LOCK_MS: "2000", TURNSTREAM_WARM_MAX: "" }, noisy.logger);
  assert.equal(noisy.warnings.length, 1);
  const [warning] = noisy.warnings;
  assert.deepEqual(warning!.fields, { removedVariables: ["TURNSTREAM_LOCK_MS", "TURNSTREAM_WARM_MAX"] });
  assert.match(
    warning!.msg!,
    /TURNSTREAM_LOCK_MS \(unset it; a library caller passes startTurnWorker option lockDuration\)/,
  );
  assert.match(warning!.msg!, /TURNSTREAM_WARM_MAX \(.*warm\.maxProcesses\)/);
  for (const removed of REMOVED_ENV_VARS) assert.ok(removed.instead.length > 0, `${removed.name} says what to do`);
});

test("a worker process with removed variables set starts, and its log has one warning naming them", async () => {
  const fleet = await processFleet({ responses: [] });
  try {
    const worker = await fleet.start("a", {
      TURNSTREAM_LEASE_MS: "2000",
      TURNSTREAM_WARM_IDLE_MS: "1500",
      TURNSTREAM_PROJECTOR_RESCAN_MS: "100",
    });
    const warnings = worker.lines.filter((line) => Array.isArray(line["removedVariables"]));
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.equal(warnings[0]!["level"], 40, "logged as a warning");
    assert.deepEqual(warnings[0]!["removedVariables"], [
      "TURNSTREAM_LEASE_MS",
      "TURNSTREAM_WARM_IDLE_MS",
      "TURNSTREAM_PROJECTOR_RESCAN_MS",
    ]);
    assert.match(String(warnings[0]!["msg"]), /TURNSTREAM_LEASE_MS \(unset it; .*option leaseMs\)/);
    assert.match(
      String(warnings[0]!["msg"]),
      /TURNSTREAM_PROJECTOR_RESCAN_MS \(run `turnstream projector --rescan-ms MS`\)/,
    );
    worker.kill("SIGTERM");
    assert.equal((await worker.exited).code, 0);
  } finally {
    await fleet.dispose();
  }
});
