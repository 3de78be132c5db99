// `turnstream cancel <turn> [--session S] [--reason TEXT]`: a queued turn never runs; a running one
// has its CLI tree killed by its worker and is recorded cancelled.
import { parseArgs } from "node:util";
import { createProducer, UnknownTurnError } from "../../queue/index.ts";
import { queueConfigFromEnv, redisOrExplain } from "./_connect.ts";

export const summary = "cancel a queued or running turn";

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { session: { type: "string" }, reason: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  const [turn, ...extra] = positionals;
  if (values.help || turn === undefined || extra.length > 0) {
    process.stderr.write("usage: turnstream cancel <turn> [--session S] [--reason TEXT]\n");
    return values.help ? 0 : 2;
  }
  const redis = await redisOrExplain("cancel");
  if (redis === undefined) return 1;
  const producer = createProducer({ redis, ...queueConfigFromEnv() });
  try {
    const by = process.env["TURNSTREAM_USER"] ?? process.env["USER"] ?? "cli";
    const r = await producer.cancelTurn(turn, { session: values.session, reason: values.reason, by });
    const said = { cancelled: "cancelled: it will not run", requested: "cancelling: its worker is ending it now", too_late: "too late: it already ended" };
    process.stdout.write(`turn ${r.turn} in session ${r.session}: ${said[r.outcome]}\n`);
    return r.outcome === "too_late" ? 1 : 0;
  } catch (err) {
    if (err instanceof UnknownTurnError) {
      process.stderr.write(`turnstream cancel: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await producer.close();
    redis.disconnect();
  }
}
