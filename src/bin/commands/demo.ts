// `turnstream demo`: the whole product in one process. Without ANTHROPIC_API_KEY it starts the
// scripted model server (offline, deterministic); with it, the real API answers. An in-process worker
// runs two turns of one session — the second resumes the first's CLI session — and the transcript is
// printed as the events land in the session's log, under the log prefix the commands read
// (--prefix, TURNSTREAM_PREFIX), so the replay command it prints finds the session.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createProducer, type Producer, type TurnResult } from "../../queue/index.ts";
import { createScrubber } from "../../telemetry/index.ts";
import { hermeticEnv, startModelServer, type ModelServer, type Script } from "../../testing/index.ts";
import { startTurnWorker } from "../../worker/index.ts";
import { EXIT } from "../exit-codes.ts";
import { DEFAULT_PREFIX } from "../../kernel/index.ts";
import { parseCommandArgs } from "./_args.ts";
import { logPrefix, queueConfigOf, redisOrExplain } from "./_connect.ts";
import { followTurn } from "./_follow.ts";

export const summary =
  "run two turns of one session end to end (offline on the scripted model server without ANTHROPIC_API_KEY)";

const TOOLS = ["Bash", "Read", "Write"];

/** What the scripted model does: look around, write notes, then (turn 2) read them back. */
export function demoScript(workspace: string): Script {
  const notes = join(workspace, "NOTES.md");
  return {
    responses: [
      {
        content: [
          { type: "text", text: "I'll look at the project first." },
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "ls && head -3 README.md", description: "List the project and peek at its README" },
          },
        ],
      },
      {
        content: [
          { type: "text", text: "It's a one-file greeting script. I'll write notes for the next turn." },
          {
            type: "tool_use",
            name: "Write",
            input: { file_path: notes, content: "# Notes\n- hello.sh prints a greeting\n- README.md describes it\n" },
          },
        ],
      },
      { content: [{ type: "text", text: "Done: NOTES.md summarises the project." }] },
      {
        match: "NOTES.md",
        content: [
          { type: "text", text: "Reading back what I wrote in the first turn." },
          { type: "tool_use", name: "Read", input: { file_path: notes } },
        ],
      },
      {
        content: [
          { type: "text", text: "The notes say hello.sh prints a greeting — the session remembered turn one." },
        ],
      },
    ],
  };
}

function makeWorkspace(): string {
  const dir = mkdtempSync(join(tmpdir(), "turnstream-demo-"));
  writeFileSync(join(dir, "README.md"), "# hello\nA tiny project: hello.sh prints a greeting.\n");
  writeFileSync(join(dir, "hello.sh"), "#!/bin/sh\necho hello\n", { mode: 0o755 });
  return dir;
}

const PROMPTS = [
  "Look at this project and write a short NOTES.md summarising it.",
  "Read NOTES.md back and tell me what you wrote in the previous turn.",
];

/**
 * The env that points the CLI at the scripted model server, with a home of its own under the demo's
 * folder: the Bash tool sources the user's shell start-up files, which an offline demo has no need
 * of (and which can stall it, e.g. on a version manager's lock).
 */
function scriptedModelEnv(server: ModelServer, root: string): Record<string, string> {
  return hermeticEnv({ baseUrl: server.url, root, maxRetries: 1 }).env;
}

interface DemoRun {
  producer: Producer;
  session: string;
  /** The log's key prefix: the replay command it prints must read the same one. */
  prefix: string;
  workspace: string;
  out: NodeJS.WriteStream;
  scrub: (text: string) => string;
}

/** Runs the demo's turns one after another; the results, or undefined once one did not finish. */
async function runTurns(demo: DemoRun): Promise<TurnResult[] | undefined> {
  const results: TurnResult[] = [];
  for (const [index, prompt] of PROMPTS.entries()) {
    demo.out.write(`\nturn ${index + 1} > ${prompt}\n`);
    const { turn } = await demo.producer.enqueueTurn({
      session: demo.session,
      prompt,
      cwd: demo.workspace,
      options: { allowedTools: TOOLS, timeoutMs: 300_000 },
    });
    const result = await followTurn(demo.producer, demo.session, turn, {
      out: demo.out,
      scrub: demo.scrub,
      timeoutMs: 600_000,
    });
    results.push(result);
    if (result.status !== "finished") {
      demo.out.write(
        demo.scrub(`turn ${index + 1} ${result.status}${result.errorKind ? ` (${result.errorKind})` : ""}\n`),
      );
      return undefined;
    }
  }
  return results;
}

/** Says whether turn 2 resumed turn 1's CLI session (the point of the demo); true when it did. */
function reportResume(demo: DemoRun, results: TurnResult[], server: ModelServer | undefined): boolean {
  const [first, second] = results;
  const resumed = first?.cliSessionId !== undefined && first.cliSessionId === second?.cliSessionId;
  demo.out.write(
    `\nboth turns ran in CLI session ${first?.cliSessionId ?? "?"}: ${resumed ? "turn 2 resumed turn 1" : "NOT resumed"}\n`,
  );
  if (server) {
    const turn2Request = server
      .requests()
      .filter((r) => r.kind === "messages")
      .at(-2);
    demo.out.write(`the model saw ${turn2Request?.messages.length ?? 0} messages of history when turn 2 began\n`);
  }
  const prefix = demo.prefix === DEFAULT_PREFIX ? "" : ` --prefix ${demo.prefix}`;
  demo.out.write(`replay it: npm run turnstream -- replay ${demo.session}${prefix}\n`);
  return resumed;
}

const usage = `usage: turnstream demo [--keep] [--prefix P] [--queue-prefix Q]
  --keep            leave the demo workspace in place
  --prefix P        log key prefix (default: TURNSTREAM_PREFIX or "ts:"); the replay command it prints uses it
  --queue-prefix Q  queue prefix (default: TURNSTREAM_QUEUE_PREFIX or "{turnstream}"); the demo's queue is its own
env: REDIS_URL (default redis://127.0.0.1:6379), ANTHROPIC_API_KEY (real API instead of the scripted server)
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseCommandArgs("demo", usage, {
    args: argv,
    options: {
      keep: { type: "boolean" },
      prefix: { type: "string" },
      "queue-prefix": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  const prefix = logPrefix(values.prefix);
  const { queuePrefix } = queueConfigOf(values);
  const out = process.stdout;
  const scrubber = createScrubber({ env: process.env });
  const scrub = (s: string): string => scrubber.scrub(s);
  const redis = await redisOrExplain("demo");
  if (redis === undefined) return EXIT.infrastructure;
  const live = Boolean(process.env["ANTHROPIC_API_KEY"]);
  const workspace = makeWorkspace();
  const server = live ? undefined : await startModelServer({ script: demoScript(workspace) });
  const instanceRoot = join(workspace, ".turnstream");
  const runEnv = server === undefined ? {} : scriptedModelEnv(server, join(instanceRoot, "cli"));
  // A private queue: a fleet worker on the same Redis must not pick up the demo's turns.
  const queueName = `demo-${randomBytes(4).toString("hex")}`;
  const session = `demo-${randomBytes(6).toString("hex")}`;
  const worker = startTurnWorker({
    redis,
    logPrefix: prefix,
    queuePrefix,
    queueName,
    workspaceRoots: [workspace],
    concurrency: 1,
    instanceRoot,
    runEnv,
    scrubber,
  });
  const producer = createProducer({ redis, logPrefix: prefix, queuePrefix, queueName });
  try {
    await worker.ready();
    out.write(
      `turnstream demo — ${server === undefined ? "real Anthropic API" : `scripted model server at ${server.url} (offline)`}\n`,
    );
    out.write(`session ${session}, workspace ${workspace}\n`);
    const demo: DemoRun = { producer, session, prefix, workspace, out, scrub };
    const results = await runTurns(demo);
    if (results === undefined) return 1;
    return reportResume(demo, results, server) ? 0 : 1;
  } finally {
    await worker.close({ graceMs: 5000 });
    await producer.queue.obliterate({ force: true }).catch(() => {});
    await producer.close();
    await server?.close();
    redis.disconnect();
    if (!values.keep) rmSync(workspace, { recursive: true, force: true });
  }
}
