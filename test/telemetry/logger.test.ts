import { test } from "node:test";
import assert from "node:assert/strict";
import { createLogger } from "../../src/telemetry/logger.ts";
import { createScrubber } from "../../src/telemetry/scrub.ts";

function capture() {
  const lines: string[] = [];
  return { lines, destination: { write: (l: string) => void lines.push(l) } };
}

const CANARY = 'canary-"quoted"\\-v4lue-ü';
const SHAPED = "sk-ant-api03-CANARYcanaryCANARY0123";

test("no canary reaches the log stream, whichever way it is logged", () => {
  const scrubber = createScrubber({ env: { ANTHROPIC_API_KEY: CANARY } });
  const { lines, destination } = capture();
  const log = createLogger({ scrubber, level: "debug", destination, base: { worker: `w-${CANARY}` } });
  log.info(`message ${CANARY}`);
  log.info({ field: CANARY, nested: { deeper: [CANARY, { again: SHAPED }] } }, "with fields");
  log.warn({ a: 1 }, "printf %s and %o", CANARY, { v: CANARY });
  log.error(new Error(`thrown ${CANARY}`, { cause: new Error(`cause ${SHAPED}`) }));
  log.error({ err: new Error(`wrapped ${CANARY}`) }, "wrapped");
  log.child({ run: CANARY, key: SHAPED }).debug("child");
  log.info(
    { headers: { authorization: "tiny", accept: "*/*" }, env: { HOME: "/root" }, apiKey: "k", token: "t" },
    "paths",
  );
  log.trace(`below level ${CANARY}`);
  const out = lines.join("");
  assert.equal(lines.length, 7);
  for (const bad of [CANARY, JSON.stringify(CANARY).slice(1, -1), SHAPED, "tiny"])
    assert.ok(!out.includes(bad), `${bad} leaked: ${out}`);
  const records = lines.map((l) => JSON.parse(l));
  assert.equal(records[0].msg, "message [REDACTED:ANTHROPIC_API_KEY]");
  assert.equal(records[0].worker, "w-[REDACTED:ANTHROPIC_API_KEY]");
  assert.equal(records[1].nested.deeper[1].again, "[REDACTED:anthropic_key]");
  assert.match(records[2].msg, /^printf \[REDACTED:ANTHROPIC_API_KEY\] and /);
  assert.match(records[3].err.message, /thrown \[REDACTED:ANTHROPIC_API_KEY\]/);
  assert.match(records[3].err.stack, /^Error: thrown \[REDACTED:ANTHROPIC_API_KEY\]/);
  assert.equal(records[5].run, "[REDACTED:ANTHROPIC_API_KEY]");
  assert.deepEqual(records[6].headers, { authorization: "[REDACTED:authorization]", accept: "*/*" });
  assert.equal(records[6].env.HOME, "[REDACTED:HOME]", "env.* is blanked whole");
  assert.equal(records[6].apiKey, "[REDACTED:apiKey]");
  assert.equal(records[6].token, "[REDACTED:token]");
  assert.equal(records[4].msg, "wrapped");
});

test("a secret registered after the logger was made is scrubbed too", () => {
  const scrubber = createScrubber();
  const { lines, destination } = capture();
  const log = createLogger({ scrubber, destination });
  scrubber.addValue("late", "late-registered-value");
  log.info({ v: "late-registered-value" }, "late-registered-value");
  assert.ok(!lines.join("").includes("late-registered-value"));
});

test("level comes from options, else LOG_LEVEL", () => {
  const { lines, destination } = capture();
  const log = createLogger({ scrubber: createScrubber(), destination, env: { LOG_LEVEL: "warn" } });
  log.info("hidden");
  log.warn("shown");
  assert.deepEqual(
    lines.map((l) => JSON.parse(l).msg),
    ["shown"],
  );
});
