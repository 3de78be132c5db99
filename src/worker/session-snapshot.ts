// The snapshot step of a run that ends (finished, or parked on a deferred call): the session file the
// CLI left, recorded as session.snapshot so any worker can resume the session from the log.
import type { TurnOutcome } from "../runner/index.ts";
import type { SessionSnapshotData } from "../events/index.ts";
import type { PreparedAttempt, PreparedRun } from "./attempt-context.ts";
import { snapshotRecord, type Snapshot } from "./snapshots.ts";

/**
 * The snapshot step: the session file the run left, as session.snapshot (a delta over the restored
 * snapshot when it extends it). Scrubbed like the lines (it is JSONL holding every tool result of the
 * session, and the patterns keep each line valid), so a resumed session shows the model the markers
 * where secrets were. A file with nothing to scrub keeps its exact bytes.
 */
export async function writeSnapshot(
  attempt: PreparedAttempt,
  outcome: TurnOutcome,
  costTotalUsd: number | undefined,
): Promise<{ at: string; snapshot: Snapshot } | undefined> {
  const { job, events, run } = attempt;
  const cliSessionId = outcome.sessionId;
  if (outcome.sessionFile === undefined || cliSessionId === undefined) return undefined;
  const file = scrubbedSessionFile(outcome.sessionFile, run.lines);
  const restored = run.resume === run.snapshot?.cliSessionId ? run.snapshot : undefined;
  const rec = snapshotRecord(file, cliSessionId, restored);
  const data: SessionSnapshotData = { ...rec.data, cwd: job.cwd };
  if (costTotalUsd !== undefined) data.costTotalUsd = costTotalUsd;
  const at = new Date().toISOString();
  await events.write("session.snapshot", data, { at });
  const snapshot: Snapshot = {
    seq: 0,
    cliSessionId,
    bytes: file,
    depth: data.depth ?? 0,
    hash: rec.hash,
    cwd: job.cwd,
    costTotalUsd,
  };
  return { at, snapshot };
}

function scrubbedSessionFile(file: Buffer, lines: PreparedRun["lines"]): Buffer {
  if (lines === undefined) return file;
  const text = file.toString("utf8");
  const out = lines.scrub(text, { sink: "log", field: "session.snapshot" });
  return out === text ? file : Buffer.from(out, "utf8");
}
