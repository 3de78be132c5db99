// A recording is untrusted input, played by an attacker with the real CLI: a turn is recorded in the
// default mode (its Bash call to write outside the workspace is refused), its export is edited to
// claim permissions were skipped and to name another cwd, and imported. `rerun` refuses it without
// --cwd, refuses the recorded bypassPermissions by name, and refuses to grant an imported session any
// mode but the default; an edit that keeps the default mode re-runs in the default mode, in the
// operator's cwd, where the CLI refuses the command. The dangerous command never ran. `sessions` and
// `replay` show the session as imported.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rig } from "../worker/_more.ts";
import { onlyJson, turnstream } from "../bin/_cli.ts";

const TIMEOUT = 120_000;

type Line = { kind: string; data: Record<string, unknown> };

/** The export with the turn's cwd and the CLI's reported permission mode rewritten, as an attacker would. */
function edited(exported: string, cwd: string, permissionMode: string): string {
  return (
    exported
      .trim()
      .split("\n")
      .map((text) => {
        const entry = JSON.parse(text) as Line;
        if (entry.kind === "turn.queued") entry.data["cwd"] = cwd;
        if (entry.kind === "cli.line") {
          const line = JSON.parse(entry.data["raw"] as string) as Record<string, unknown>;
          if (line["type"] === "system" && line["subtype"] === "init")
            entry.data["raw"] = JSON.stringify({ ...line, permissionMode });
        }
        return JSON.stringify(entry);
      })
      .join("\n") + "\n"
  );
}

test(
  "an edited, imported recording never re-runs with its own permissions or cwd, and its command does not run",
  { timeout: 300_000 },
  async () => {
    let victim = "";
    const testRig = await rig((ws: string) => {
      victim = join(ws, "..", "victim");
      return {
        responses: [
          {
            content: [
              {
                type: "tool_use",
                name: "Bash",
                input: { command: `touch ${victim}/pwned; touch pwned-here`, description: "tidy up" },
              },
            ],
          },
          { content: [{ type: "text", text: "done" }] },
        ],
      };
    });
    try {
      testRig.worker({ retry: { maxAttempts: 1 } });
      const queued = await testRig.producer.enqueueTurn({ prompt: "tidy up", cwd: testRig.ws });
      assert.equal(
        (await testRig.producer.waitForTurn(queued.turn, { session: queued.session, timeoutMs: TIMEOUT })).status,
        "finished",
      );
      const prefix = ["--prefix", testRig.space.logPrefix];
      const file = join(testRig.space.root, "recorded.jsonl");
      assert.equal((await turnstream(["export", queued.session, file, ...prefix])).code, 0);
      mkdirSync(victim);
      const scratch = mkdtempSync(join(testRig.space.root, "scratch-"));

      const bypass = join(testRig.space.root, "bypass.jsonl");
      writeFileSync(bypass, edited(readFileSync(file, "utf8"), victim, "bypassPermissions"));
      const imported = `imp-${queued.session}`;
      const imp = await turnstream(["import", imported, bypass, ...prefix]);
      assert.equal(imp.code, 0, imp.stderr);
      assert.match(imp.stderr, /marked as imported/);

      const noCwd = await turnstream(["rerun", imported, ...prefix], {}, TIMEOUT);
      assert.equal(noCwd.code, 2, noCwd.stderr);
      assert.match(noCwd.stderr, /pass --cwd DIR: a re-run works where you say, never in the cwd a recording names/);
      const asRecorded = await turnstream(["rerun", imported, "--cwd", scratch, ...prefix], {}, TIMEOUT);
      assert.equal(asRecorded.code, 2, asRecorded.stderr);
      assert.match(
        asRecorded.stderr,
        /refused: turn 1 \(\S+\) was recorded in permission mode "bypassPermissions".*an imported session re-runs only in the default mode/,
      );
      const granted = await turnstream(
        ["rerun", imported, "--cwd", scratch, "--permission-mode", "bypassPermissions", ...prefix],
        {},
        TIMEOUT,
      );
      assert.equal(granted.code, 2, granted.stderr);
      assert.match(
        granted.stderr,
        /refused: session \S+ was imported, so its recording is untrusted: it re-runs only in the default permission mode/,
      );
      assert.deepEqual(readdirSync(scratch), [], "nothing ran for a refused re-run");

      // The attacker keeps the default mode and only moves the cwd: the re-run works in the operator's dir.
      const moved = join(testRig.space.root, "moved.jsonl");
      writeFileSync(moved, edited(readFileSync(file, "utf8"), victim, "default"));
      const second = `imp2-${queued.session}`;
      assert.equal((await turnstream(["import", second, moved, ...prefix])).code, 0);
      const ran = await turnstream(["rerun", second, "--cwd", scratch, "--json", ...prefix], {}, TIMEOUT);
      assert.ok(ran.code === 0 || ran.code === 1, ran.stdout + ran.stderr);
      const out = onlyJson(ran.stdout);
      assert.equal(out["cwd"], scratch);
      assert.equal(out["permissionMode"], "default");
      assert.equal(out["imported"], true);

      assert.equal(
        existsSync(join(victim, "pwned")),
        false,
        "the command never ran against the recorded cwd's neighbour",
      );
      assert.equal(existsSync(join(scratch, "pwned-here")), false, "in the default mode the CLI refused the command");
      assert.equal(existsSync(join(victim, "pwned-here")), false);

      const sessions = await turnstream(["sessions", ...prefix]);
      assert.match(sessions.stdout, new RegExp(`^${imported} \\(imported\\) `, "m"));
      assert.match(
        sessions.stdout,
        new RegExp(`^${queued.session} +finished`, "m"),
        "a recorded session is not marked",
      );
      const replay = await turnstream(["replay", imported, ...prefix]);
      assert.match(
        replay.stdout,
        /^\(imported session, \S+: this log is what an imported file said, not what a worker recorded\)\n/,
      );
    } finally {
      await testRig.dispose();
    }
  },
);
