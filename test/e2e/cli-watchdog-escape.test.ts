// The real CLI's Bash tool runs commands that leave the run as far as an unprivileged process can:
// `setsid -f env -u TURNSTREAM_TREE sleep 301.N` (own session, no marker) and `env -i setsid -f sleep
// 302.N` (own session, empty environment). Nothing of them may outlive the turn: not when the turn
// ends normally (the reap), and not when the host is SIGKILLed mid-turn (the watchdog). Checked in
// /proc by command line, and the run's cgroup must be gone.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { runTurn, selectContainment, type ContainmentKind } from "../../src/runner/index.ts";
import { startScriptedServer } from "../runner/_model.ts";
import {
  alive,
  awaitEscapes,
  escapeCommands,
  escapeNonce,
  escapees,
  hermeticEnv,
  killEscapees,
  startHost,
  waitUntil,
} from "../runner/_support.ts";

/** The kinds this host offers (the best one first), each tried in turn. */
const KINDS = (["cgroup-v2", "cgroup-v1-freezer", "pid-namespace"] as const).filter(
  (k) => selectContainment([k]).kind === k,
);

test("this host offers a cgroup to contain runs", () => {
  assert.ok(KINDS.includes("cgroup-v2") || KINDS.includes("cgroup-v1-freezer"), `offered: ${KINDS.join(", ")}`);
});

for (const kind of KINDS) {
  test(`${kind}: a turn whose Bash tool escapes (setsid, env -u / env -i): nothing of it is left once the outcome settles`, async () => {
    selectContainment([kind]);
    const nonce = escapeNonce();
    const server = await startScriptedServer([
      {
        tool: {
          name: "Bash",
          input: { command: `${escapeCommands(nonce)}; ${awaitEscapes(nonce)}; echo started`, description: "x" },
        },
      },
      { text: "done" },
    ]);
    try {
      const handle = runTurn({
        cwd: mkdtempSync(join(tmpdir(), "ts-escape-")),
        prompt: "run it",
        skipPermissions: true,
        sandboxed: true,
        env: hermeticEnv(server.url),
        killGraceMs: 500,
      });
      assert.equal(handle.containment, kind);
      let ran = false;
      for await (const parsed of handle.lines)
        if (parsed.type === "user" && parsed.raw.includes("started")) ran = escapees(nonce).length === 2 || ran;
      const outcome = await handle.outcome;
      assert.equal(outcome.resultText, "done");
      assert.ok(ran, "the escaped sleepers were running while the turn went on");
      assert.deepEqual(escapees(nonce), [], "no sleep 301/302 of this turn exists once the outcome settled");
      if (handle.cgroup !== undefined) assert.equal(existsSync(handle.cgroup), false, "the run's cgroup is removed");
    } finally {
      killEscapees(nonce);
      await server.close();
    }
  });
}

for (const kind of KINDS) {
  test(`${kind}: host SIGKILLed mid-turn: the watchdog kills the escaped processes too and removes the cgroup`, async () => {
    const nonce = escapeNonce();
    const { host, info, exited } = await startHost("wait", `${escapeCommands(nonce)}; echo started`, {
      HOST_CONTAINMENT: kind,
    });
    try {
      assert.equal(info.containment, kind);
      await waitUntil(() => escapees(nonce).length === 2, 10_000, "both escaped sleepers");
      host.kill("SIGKILL");
      await exited;
      // The watchdog wakes when the host dies: TERM, KILL after 0.5 s, then the cgroup.
      // Bounds, not expected times: on a loaded machine the watchdog's wake-up and kills take longer.
      await waitUntil(
        () => escapees(nonce).length === 0 && !alive(info.cli),
        15_000,
        "the escaped sleepers and the CLI to die",
      );
      if (info.cgroup !== undefined) {
        await waitUntil(() => !existsSync(info.cgroup!), 10_000, "the run's cgroup to be removed");
        // The host's folder goes right after its last run's cgroup, in a step of its own.
        await waitUntil(() => !existsSync(dirname(info.cgroup!)), 10_000, "the dead host's folder to be removed");
      }
      await waitUntil(() => !alive(info.watchdog!), 10_000, "the watchdog to exit");
    } finally {
      if (host.exitCode === null) host.kill("SIGKILL");
      killEscapees(nonce);
    }
  });
}
