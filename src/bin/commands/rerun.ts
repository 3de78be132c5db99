// `turnstream rerun <session>`: plays a logged run's model side back to the real CLI in a workspace
// and says whether the agent did and got the same (exit 0) or not (exit 1, with a readable diff).
import { resolve } from "node:path";
import { forTerminal } from "../../kernel/index.ts";
import { connectForCommand } from "../../projector/index.ts";
import {
  NoRecordedTurnError,
  RecordingRefusedError,
  renderComparison,
  RERUN_PERMISSION_MODES,
  type RerunPermissionMode,
} from "../../rerun/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import type { SessionHistory } from "../../archive/index.ts";
import { ARCHIVE_FLAG_OPTIONS, ARCHIVE_FLAG_USAGE, logPrefix, openHistory, rejectSessionId } from "./_connect.ts";
import { rerunSession, workspaceProblem } from "./_rerun.ts";
import { defaultScrub } from "./_scrub.ts";

export const summary =
  "re-run a logged session's turns offline against its recorded model answers and diff the tool calls";

const usage = `usage: turnstream rerun <session> --cwd DIR [--turn T] [--permission-mode MODE] [--json] [--prefix P]
                       [--archive URL]
  Serves the recorded model answers from a scripted model server, runs the same prompt(s) with the
  real CLI through an in-process worker, and compares tool calls (name, input), tool results (text,
  error flag) and each turn's ending (status, error kind, result text) with the recording.
  A recording is untrusted: the re-run's cwd and permissions are yours, never the recording's. A turn
  recorded in another permission mode than the one you grant is refused; an imported session, or one
  read from the archive (whose files and rows anyone with access can edit), re-runs only in the
  default mode.
  --cwd DIR    where the re-run works (required; e.g. a copy of the workspace or an empty directory)
  --turn T     only this turn: its id, or its number in the session (1 is the first)
  --permission-mode MODE  the mode the re-run's CLI runs in: ${RERUN_PERMISSION_MODES.join(", ")}
               (default: default)
  --json       one JSON object on stdout: the comparison, outcome and exitCode
  --prefix P   key prefix (default: TURNSTREAM_PREFIX or "ts:")
${ARCHIVE_FLAG_USAGE}Exit: 0 the runs match, 1 they differ, 2 usage (no such session or turn), 3 infrastructure.
`;

function usageError(json: boolean | undefined, message: string): number {
  if (json) process.stdout.write(`${JSON.stringify({ error: message, outcome: "usage", exitCode: EXIT.usage })}\n`);
  process.stderr.write(`turnstream rerun: ${message}\n`);
  return EXIT.usage;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("rerun", usage, {
    args: argv,
    allowPositionals: true,
    options: {
      turn: { type: "string" },
      cwd: { type: "string" },
      "permission-mode": { type: "string" },
      json: { type: "boolean" },
      prefix: { type: "string" },
      ...ARCHIVE_FLAG_OPTIONS,
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  if (positionals.length !== 1)
    return usageError(values.json, `takes exactly one session, got ${positionals.length}\n${usage}`);
  const session = positionals[0]!;
  if (rejectSessionId("rerun", session)) return EXIT.usage;
  if (values.cwd === undefined) {
    const why =
      "a re-run works where you say, never in the cwd a recording names (a copy of the workspace, or an empty directory)";
    return usageError(values.json, `pass --cwd DIR: ${why}`);
  }
  const problem = workspaceProblem(values.cwd);
  if (problem !== undefined) return usageError(values.json, `--cwd ${problem}`);
  const mode = values["permission-mode"] ?? "default";
  if (!(RERUN_PERMISSION_MODES as readonly string[]).includes(mode)) {
    const modes = RERUN_PERMISSION_MODES.join(", ");
    return usageError(values.json, `--permission-mode must be one of ${modes}, got ${JSON.stringify(mode)}`);
  }
  const scrub = defaultScrub();
  const redis = await connectForCommand();
  let history: SessionHistory | undefined;
  try {
    const permissionMode = mode as RerunPermissionMode;
    history = await openHistory(redis, logPrefix(values.prefix), values.archive);
    const rerun = await rerunSession({
      redis,
      logPrefix: history.prefix,
      history,
      session,
      turn: values.turn,
      cwd: resolve(values.cwd),
      permissionMode,
    });
    const exitCode = rerun.comparison.match ? EXIT.finished : EXIT.taskFailed;
    if (values.json)
      process.stdout.write(
        `${scrub(JSON.stringify({ ...rerun, outcome: rerun.comparison.match ? "finished" : "task_failed", exitCode }))}\n`,
      );
    // The diff quotes what the model and the tools produced: escaped for the terminal, lines kept.
    else process.stdout.write(forTerminal(scrub(renderComparison(rerun.comparison)), { multiline: true }));
    return exitCode;
  } catch (err) {
    if (err instanceof NoRecordedTurnError) return usageError(values.json, `session ${session}: ${err.message}`);
    if (err instanceof RecordingRefusedError) return usageError(values.json, `refused: ${forTerminal(err.message)}`);
    throw err;
  } finally {
    await history?.close();
    redis.disconnect();
  }
}
