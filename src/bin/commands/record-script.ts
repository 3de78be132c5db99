// `turnstream record-script <session>`: the model-server script that plays a logged run's model side
// back (src/rerun/script.ts), for `turnstream model-server --script` or a test of one's own.
import { connectForCommand } from "../../projector/index.ts";
import { NoRecordedTurnError, recordedTurns, scriptFromTurns } from "../../rerun/index.ts";
import { parseCommandArgs } from "./_args.ts";
import type { SessionHistory } from "../../archive/index.ts";
import {
  ARCHIVE_FLAG_OPTIONS,
  ARCHIVE_FLAG_USAGE,
  logPrefix,
  openHistory,
  readSession,
  rejectSessionId,
} from "./_connect.ts";
import { defaultScrub } from "./_scrub.ts";

export const summary = "print a model-server script that plays a logged session's model side back";

const usage = `usage: turnstream record-script <session> [--turn T] [--cwd DIR] [--prefix P] [--archive URL] > script.json
  Each API response the CLI received becomes one scripted response (text, thinking, tool calls with
  their ids and inputs, stop reason, usage), each API error a scripted error; a request the recording
  cannot answer gets an error (see turnstream rerun).
  --turn T     only this turn: its id, or its number in the session (1 is the first)
  --cwd DIR    the directory the script will be played in: the recorded cwd is moved there
  --prefix P   key prefix (default: TURNSTREAM_PREFIX or "ts:")
${ARCHIVE_FLAG_USAGE}`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("record-script", usage, {
    args: argv,
    allowPositionals: true,
    options: {
      turn: { type: "string" },
      cwd: { type: "string" },
      prefix: { type: "string" },
      ...ARCHIVE_FLAG_OPTIONS,
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const [session, ...extra] = args.positionals;
  if (session === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (rejectSessionId("record-script", session)) return 2;
  const redis = await connectForCommand();
  let history: SessionHistory | undefined;
  try {
    history = await openHistory(redis, logPrefix(args.values.prefix), args.values.archive);
    const events = await readSession(history, session);
    const script = scriptFromTurns(recordedTurns(events, args.values.turn), { cwd: args.values.cwd });
    process.stdout.write(`${defaultScrub()(JSON.stringify(script, null, 2))}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof NoRecordedTurnError)) throw err;
    process.stderr.write(`turnstream record-script: session ${session}: ${err.message}\n`);
    return 2;
  } finally {
    await history?.close();
    redis.disconnect();
  }
}
