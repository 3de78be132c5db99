// Two worker processes on one instance root, started together, each mid-way through a slow Bash tool
// call: they hold different instance ids. kill -9 of one, then a start with the same environment: the
// new process takes the dead one's id back and its start-up sweep removes the dead run's config home
// (with its credential copy), while the other worker's live home stays.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { defaultInstanceStem } from "../../src/runner/index.ts";
import { processFleet, readAll, waitUntil, type WorkerProcess } from "../worker/_support.ts";

/** The config dir (CLAUDE_CONFIG_DIR) of the process whose command line holds `needle` and whose env names `root`. */
function configDirOf(root: string, needle: string): string | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, "latin1").includes(needle)) continue;
      const env = readFileSync(`/proc/${name}/environ`, "latin1").split("\0");
      const dir = env.find((e) => e.startsWith("CLAUDE_CONFIG_DIR="))?.slice("CLAUDE_CONFIG_DIR=".length);
      if (dir !== undefined && dir.startsWith(root)) return dir;
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

async function instanceOf(worker: WorkerProcess): Promise<string> {
  const line = await worker.waitFor((l) => l["msg"] === "instance id held", 20000, "the instance id line");
  return String(line["instance"]);
}

test("a worker killed mid-turn and started again takes its instance id back and sweeps its dead run's home; the other worker's live home stays", async () => {
  const slow = (word: string, secs: number) => ({
    match: word,
    content: [
      {
        type: "tool_use",
        name: "Bash",
        input: { command: `echo ${word}; sleep ${secs}; echo slept`, description: "wait" },
      },
    ],
  });
  const fleet = await processFleet({ responses: [slow("alpha", 41), slow("bravo", 43)] });
  const { space, producer, ws } = fleet;
  const root = space.dir("instance-root");
  // Every worker gets the same environment: one instance root for all of them.
  const env = { TURNSTREAM_INSTANCE_ROOT: root, TURNSTREAM_SANDBOXED: "1", TURNSTREAM_SHUTDOWN_GRACE_MS: "500" };
  try {
    const workers = await Promise.all([fleet.start("shared", env), fleet.start("shared", env)]);
    const ids = await Promise.all(workers.map(instanceOf));
    const stem = defaultInstanceStem();
    assert.deepEqual([...ids].sort(), [`${stem}-0`, `${stem}-1`], "two workers started together hold different ids");

    for (const word of ["alpha", "bravo"])
      await producer.enqueueTurn({
        session: `s-${word}-${space.id}`,
        prompt: `${word}: run the slow command`,
        cwd: ws,
        options: { skipPermissions: true },
      });
    let alphaHome: string | undefined;
    let bravoHome: string | undefined;
    await waitUntil(
      () =>
        (alphaHome ??= configDirOf(root, "sleep 41")) !== undefined &&
        (bravoHome ??= configDirOf(root, "sleep 43")) !== undefined,
      45000,
      "both Bash sleeps to start",
    ).catch(async (err: unknown) => {
      const seen = (await readAll(producer.log, `s-alpha-${space.id}`)).map(
        (e) => `${e.kind}:${JSON.stringify(e.data).slice(0, 300)}`,
      );
      throw new Error(
        `${(err as Error).message}; log: ${seen.join(" | ")}; workers said: ${workers.flatMap((w) => w.lines.map((l) => String(l["msg"]))).join(" | ")}`,
      );
    });
    const victimIndex = ids.findIndex((id) => alphaHome!.includes(`/instances/${id}/`));
    assert.ok(victimIndex >= 0, `alpha's home ${alphaHome} is under a worker's instance`);
    assert.ok(!bravoHome!.includes(`/instances/${ids[victimIndex]}/`), "each worker ran one turn");

    const victim = workers[victimIndex]!;
    victim.kill("SIGKILL");
    await victim.exited;
    assert.ok(existsSync(alphaHome!), "a SIGKILLed worker leaves its run's home behind");

    const restarted = await fleet.start("shared", env);
    assert.equal(await instanceOf(restarted), ids[victimIndex], "the restarted worker takes the dead one's id back");
    assert.equal(existsSync(alphaHome!), false, "its start-up sweep removed the dead run's home");
    const swept = restarted.lines.find((l) => l["msg"] === "swept what dead runs left behind");
    assert.ok(swept !== undefined && Number(swept["configHomes"]) >= 1, JSON.stringify(swept));
    assert.ok(!JSON.stringify(swept).includes(root), "the log gives counts, not paths");
    assert.ok(existsSync(bravoHome!), "the other worker's live home stays");
  } finally {
    await fleet.dispose();
  }
});
