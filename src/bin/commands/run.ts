// `turnstream run`: enqueue one turn; with --wait, follow it live and exit 0 only if it finished.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Scrub } from "../../projector/index.ts";
import { createProducer, InvalidTurnError, MissingVariableError, type EnqueueInput, type EnqueueResult, type Producer } from "../../queue/index.ts";
import { parseCommandArgs, type ParsedArgs } from "./_args.ts";
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

const options = {
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
} as const;

type RunArgs = ParsedArgs<{ allowPositionals: true; options: typeof options }>;
type RunValues = RunArgs["values"];

/** The prompt: --prompt-file, else the words after the options, else stdin when it is not a terminal. */
async function readPrompt(args: RunArgs): Promise<string> {
  const file = args.values["prompt-file"];
  if (file !== undefined) return readFileSync(file, "utf8");
  const prompt = args.positionals.join(" ");
  return prompt.length === 0 && !process.stdin.isTTY ? readStdin() : prompt;
}

/** --var key=value pairs, or undefined after saying on stderr which one is malformed. */
function templateVariables(pairs: readonly string[]): Record<string, string> | undefined {
  const variables: Record<string, string> = {};
  for (const kv of pairs) {
    const eq = kv.indexOf("=");
    if (eq <= 0) {
      process.stderr.write(`turnstream run: --var takes key=value, got '${kv}'\n`);
      return undefined;
    }
    variables[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return variables;
}

function enqueueInput(v: RunValues, prompt: string, variables: Record<string, string>): EnqueueInput {
  return {
    prompt,
    cwd: resolve(v.cwd ?? process.cwd()),
    session: v.session,
    idempotencyKey: v["idempotency-key"],
    variables: Object.keys(variables).length > 0 ? variables : undefined,
    options: {
      model: v.model,
      supervised: v.supervised,
      maxTurns: v["max-turns"] === undefined ? undefined : Number(v["max-turns"]),
      allowedTools: v["allowed-tools"]?.split(",").filter(Boolean),
    },
  };
}

/** Follows the turn live and prints its result; exit 0 only when it finished. */
async function followToEnd(producer: Producer, queued: EnqueueResult, v: RunValues, scrub: Scrub): Promise<number> {
  if (!v.json) process.stdout.write(`turn ${queued.turn} in session ${queued.session}\n`);
  const result = await followTurn(producer, queued.session, queued.turn, {
    out: v.json ? process.stderr : process.stdout,
    scrub,
    timeoutMs: v["timeout-ms"] === undefined ? undefined : Number(v["timeout-ms"]),
  });
  if (v.json) {
    const { event: _event, ...rest } = result;
    process.stdout.write(scrub(JSON.stringify(rest)) + "\n");
  } else if (result.resultText !== undefined) {
    process.stdout.write(scrub(`result (${result.status}): ${result.resultText}\n`));
  }
  return result.status === "finished" ? 0 : 1;
}

function printQueued(queued: EnqueueResult, json: boolean | undefined): void {
  const again = queued.created ? "" : " (already queued with that idempotency key)";
  process.stdout.write(json ? `${JSON.stringify(queued)}\n` : `queued turn ${queued.turn} in session ${queued.session}${again}\n`);
}

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("run", usage, { args: argv, allowPositionals: true, options });
  if (typeof args === "number") return args;
  const v = args.values;
  const prompt = await readPrompt(args);
  const variables = templateVariables(v.var ?? []);
  if (variables === undefined) return 2;
  const scrub = defaultScrub();
  const redis = await redisOrExplain("run");
  if (redis === undefined) return 1;
  const producer = createProducer({ redis, ...queueConfigFromEnv() });
  try {
    const queued = await producer.enqueueTurn(enqueueInput(v, prompt, variables));
    if (v.wait) return await followToEnd(producer, queued, v, scrub);
    printQueued(queued, v.json);
    return 0;
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
