// `turnstream cancel <turn> [--session S] [--reason TEXT]`: a queued turn never runs; a running one
// has its CLI tree killed by its worker and is recorded cancelled. A turn that has ended already is
// not an error (exit 0, said so): the pipeline's wish, that it not run on, holds.
import { operatorName } from "../../decisions/index.ts";
import { createProducer, UnknownTurnError, type CancelResult } from "../../queue/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";
import { QUEUE_FLAG_OPTIONS, QUEUE_FLAGS_USAGE, queueConfigOf, redisOrExplain } from "./_connect.ts";

export const summary = "cancel a queued or running turn";

const usage = `usage: turnstream cancel <turn> [--session S] [--reason TEXT] [--json] [--prefix P] [--queue-prefix Q] [--queue NAME]
  --session S       the turn's session, needed only when its job record has expired
  --reason TEXT     recorded in turn.cancelled
  --json            one JSON object: session, turn, outcome (cancelled | requested | too_late)
${QUEUE_FLAGS_USAGE}`;

const options = {
  session: { type: "string" },
  reason: { type: "string" },
  json: { type: "boolean" },
  ...QUEUE_FLAG_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

const SAID: Readonly<Record<CancelResult["outcome"], string>> = {
  cancelled: "cancelled: it will not run",
  requested: "cancelling: its worker is ending it now",
  too_late: "it had ended already; nothing to cancel",
};

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("cancel", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  const [turn, ...extra] = positionals;
  if (turn === undefined || extra.length > 0) {
    process.stderr.write(usage);
    return EXIT.usage;
  }
  const redis = await redisOrExplain("cancel");
  if (redis === undefined) return EXIT.infrastructure;
  const producer = createProducer({ redis, ...queueConfigOf(values) });
  try {
    const by = operatorName();
    const cancelled = await producer.cancelTurn(turn, { session: values.session, reason: values.reason, by });
    process.stdout.write(
      values.json
        ? `${JSON.stringify(cancelled)}\n`
        : `turn ${cancelled.turn} in session ${cancelled.session}: ${SAID[cancelled.outcome]}\n`,
    );
    return EXIT.finished;
  } catch (err) {
    if (!(err instanceof UnknownTurnError)) throw err;
    process.stderr.write(
      `turnstream cancel: turn ${turn} is not known to the queue; check the id, or pass --session S when its job record has expired\n`,
    );
    return EXIT.usage;
  } finally {
    await producer.close();
    redis.disconnect();
  }
}
