// The round both turn-path benches run: `turns` turns over SESSIONS sessions, CONCURRENCY at a time,
// later turns of a session resumed; either through the queue or as bare CLI runs, "say done" each.
import { spawn } from "node:child_process";
import type { Producer } from "../src/queue/index.ts";

export const SESSIONS = 4;
export const CONCURRENCY = 2;

/** Runs `bin` with the prompt on stdin, reads its stdout to the end; the session id it printed. */
export async function spawnAndRead(
  bin: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<string | undefined> {
  const child = spawn(bin, args, { cwd, env, stdio: ["pipe", "pipe", "ignore"] });
  child.stdin.end("say done");
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  await new Promise((r) => child.once("close", r));
  return /"session_id":"([0-9a-f-]+)"/.exec(out)?.[1];
}

/**
 * Bare: CONCURRENCY lanes, each running its sessions' turns in order, one at a time. `home(s)` is
 * session s's home for this round; `run(home, resume)` runs one turn and returns its session id.
 */
export async function bareRound(
  turns: number,
  home: (session: number) => string,
  run: (home: string, resume: string | undefined) => Promise<string | undefined>,
): Promise<void> {
  const lane = async (sessions: number[]): Promise<void> => {
    const ids = new Map<number, string | undefined>();
    const homes = new Map(sessions.map((s) => [s, home(s)]));
    for (let round = 0; round < turns / SESSIONS; round++)
      for (const session of sessions) ids.set(session, await run(homes.get(session)!, ids.get(session)));
  };
  await Promise.all(
    Array.from({ length: CONCURRENCY }, (_, i) => [...Array(SESSIONS).keys()].filter((s) => s % CONCURRENCY === i)).map(
      lane,
    ),
  );
}

/**
 * Queued: enqueues every turn (turn i to session `session(i % SESSIONS)`), then waits for all; throws unless all
 * finished.
 */
export async function queuedRound(
  producer: Producer,
  turns: number,
  session: (index: number) => string,
  cwd: string,
  timeoutMs: number,
): Promise<void> {
  const ids: string[] = [];
  for (let turn = 0; turn < turns; turn++)
    ids.push((await producer.enqueueTurn({ session: session(turn % SESSIONS), prompt: "say done", cwd })).turn);
  const results = await Promise.all(ids.map((t) => producer.waitForTurn(t, { timeoutMs })));
  const bad = results.filter((r) => r.status !== "finished");
  if (bad.length > 0) throw new Error(`${bad.length} turns did not finish: ${JSON.stringify(bad[0]!.event.data)}`);
}
