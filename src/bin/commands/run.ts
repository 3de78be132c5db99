// `turnstream run`: enqueue one turn; with --wait, follow it live and exit 0 only if it finished.
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { createProducer, InvalidTurnError, MissingVariableError } from "../../queue/index.ts";
import { queueConfigFromEnv, readStdin, redisOrExplain } from "./_connect.ts";
import { followTurn } from "./_follow.ts";
import { defaultScrub } from "./_scrub.ts";

export const summary = "enqueue a turn (--wait: follow it live and exit with its outcome)";

const usage = `usage: turnstream run [--session S] [--cwd DIR] [--wait] [--json] [--supervised] [--model M] [--max-turns N]
                      [--allowed-tools A,B] [--idempotency-key K] [--var key=value …] [--timeout-ms MS]
                      [--] PROMPT | --prompt-file FILE | (prompt on stdin)
--supervised: each risky tool call waits for \`turnstream decide\` (or a trust rule); see \`turnstream pending\`.
A prompt given after -- is visible to other local users in the process list while this command runs;
prefer --prompt-file or stdin for anything sensitive.
`;

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        session: { type: "string" },
        cwd: { type: "string" },
        wait: { type: "boolean" },
        supervised: { type: "boolean" },
        json: { type: "boolean" },
        model: { type: "string" },
        "max-turns": { type: "string" },
        "allowed-tools": { type: "string" },
        "idempotency-key": { type: "string" },
        var: { type: "string", multiple: true },
        "timeout-ms": { type: "string" },
        "prompt-file": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    process.stderr.write(`turnstream run: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  const v = parsed.values;
  if (v.help) {
    process.stdout.write(usage);
    return 0;
  }
  let prompt = parsed.positionals.join(" ");
  if (v["prompt-file"] !== undefined) {
    const { readFileSync } = await import("node:fs");
    prompt = readFileSync(v["prompt-file"], "utf8");
  } else if (prompt.length === 0 && !process.stdin.isTTY) {
    prompt = await readStdin();
  }
  const variables: Record<string, string> = {};
  for (const kv of v.var ?? []) {
    const eq = kv.indexOf("=");
    if (eq <= 0) {
      process.stderr.write(`turnstream run: --var takes key=value, got '${kv}'\n`);
      return 2;
    }
    variables[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const int = (s: string | undefined): number | undefined => (s === undefined ? undefined : Number(s));
  const options = {
    ...(v.model !== undefined ? { model: v.model } : {}),
    ...(v.supervised ? { supervised: true } : {}),
    ...(v["max-turns"] !== undefined ? { maxTurns: int(v["max-turns"]) } : {}),
    ...(v["allowed-tools"] !== undefined ? { allowedTools: v["allowed-tools"].split(",").filter(Boolean) } : {}),
  };
  const scrub = defaultScrub();
  const redis = await redisOrExplain("run");
  if (redis === undefined) return 1;
  const producer = createProducer({ redis, ...queueConfigFromEnv() });
  try {
    const queued = await producer.enqueueTurn({
      prompt,
      cwd: resolve(v.cwd ?? process.cwd()),
      ...(v.session !== undefined ? { session: v.session } : {}),
      ...(v["idempotency-key"] !== undefined ? { idempotencyKey: v["idempotency-key"] } : {}),
      ...(Object.keys(variables).length > 0 ? { variables } : {}),
      options,
    });
    if (!v.wait) {
      process.stdout.write(v.json ? `${JSON.stringify(queued)}\n` : `queued turn ${queued.turn} in session ${queued.session}${queued.created ? "" : " (already queued with that idempotency key)"}\n`);
      return 0;
    }
    if (!v.json) process.stdout.write(`turn ${queued.turn} in session ${queued.session}\n`);
    const result = await followTurn(producer, queued.session, queued.turn, {
      out: v.json ? process.stderr : process.stdout,
      scrub,
      ...(v["timeout-ms"] !== undefined ? { timeoutMs: Number(v["timeout-ms"]) } : {}),
    });
    if (v.json) {
      const { event: _event, ...rest } = result;
      process.stdout.write(scrub(JSON.stringify(rest)) + "\n");
    } else if (result.resultText !== undefined) {
      process.stdout.write(scrub(`result (${result.status}): ${result.resultText}\n`));
    }
    return result.status === "finished" ? 0 : 1;
  } catch (err) {
    if (err instanceof InvalidTurnError || err instanceof MissingVariableError) {
      process.stderr.write(`turnstream run: ${scrub(err.message)}\n`);
      return 2;
    }
    throw err;
  } finally {
    await producer.close();
    redis.disconnect();
  }
}
