// `turnstream tail` scrubs each event before it cuts the summary short: a token whose first
// characters fit in the summary shows as its marker, never as a prefix too short to look like one.
// Logs written before cli.line text was scrubbed of shapes (or with TURNSTREAM_KEEP_RAW_LINES=1) hold such tokens raw.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { formatEvent } from "../../src/bin/commands/tail.ts";
import { defaultScrub } from "../../src/bin/commands/_scrub.ts";
import { createEventLog, envelopeSchema } from "../../src/log/index.ts";
import { cleanupKeys, NODE, redisFor, testSpace } from "../worker/_support.ts";

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const githubToken = (): string => `ghp_${Array.from(randomBytes(36), (b) => ALNUM[b % ALNUM.length]).join("")}`;
// 37 characters: the summary's 60-character cut would leave `ghp_` and 18 more, too short to be redacted.
const LEAD = "the deploy script printed its token: ";

const toolResultLine = (text: string): string =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ tool_use_id: "toolu_1", type: "tool_result", content: text }] },
    session_id: "c1",
  });

function assertRedacted(out: string, token: string): void {
  assert.ok(out.includes("[REDACTED:github_token]"), out);
  assert.ok(!out.includes(token.slice(0, 6)), `a prefix of the token shows: ${out}`);
}

test("formatEvent: a 40-character token in a tool result shows as its marker, no prefix of it", () => {
  assert.equal(LEAD.length, 37);
  const token = githubToken();
  const env = envelopeSchema.parse({
    v: 1,
    seq: 3,
    session: "s",
    turn: "t_abcdefgh12",
    attempt: 1,
    epoch: 1,
    at: new Date().toISOString(),
    kind: "cli.line",
    data: { raw: toolResultLine(LEAD + token) },
  });
  assertRedacted(formatEvent(env, false, defaultScrub({})), token);
});

test("turnstream tail on a log holding a raw token prints the marker, no prefix of it", async () => {
  const space = testSpace();
  const redis = redisFor();
  const token = githubToken();
  try {
    const log = createEventLog({ redis, prefix: space.logPrefix });
    const session = `s-${space.id}`;
    const { epoch, attempt } = await log.beginAttempt(session, "t_tailscrub01");
    await log.append(session, epoch, [
      { turn: "t_tailscrub01", attempt, kind: "cli.line", data: { raw: toolResultLine(LEAD + token) } },
    ]);
    const output = await promisify(execFile)(
      NODE,
      [join(process.cwd(), "src", "bin", "turnstream.ts"), "tail", session],
      {
        env: { ...process.env, NO_COLOR: "1", TURNSTREAM_PREFIX: space.logPrefix },
        timeout: 60_000,
      },
    );
    assert.match(output.stdout, /tool_result toolu_1/);
    assertRedacted(output.stdout, token);
  } finally {
    await cleanupKeys(redis, space);
    redis.disconnect();
    space.cleanup();
  }
});
