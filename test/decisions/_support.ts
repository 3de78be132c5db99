// Shared set-up for the decision tests: a private key prefix, a session with a begun attempt, a hub
// that trusts the test operator's key, helpers to decide and add rules signed with it, to forward one
// call to a hub as the CLI's hook does, to run a real CLI turn under supervision and to wait for log events.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn } from "../../src/runner/index.ts";
import { connectRedis, createEventLog, type Envelope, type EventLog, type RedisClient } from "../../src/log/index.ts";
import { hermeticEnv, startModelServer, type ScriptResponse } from "../../src/testing/index.ts";
import { OPERATOR, operatorKey, trustedKeys } from "../support/operator-keys.ts";
import {
  decide,
  FORWARDER_PATH,
  prepareSupervisedRun,
  RuleStore,
  ruleId,
  signRule,
  startDecisionHub,
  type DecideInput,
  type DecideResult,
  type DecisionHub,
  type DecisionHubOptions,
  type SupervisedRun,
  type SupervisedRunOptions,
  type TrustRule,
} from "../../src/decisions/index.ts";

// The operator of these tests (hubs from withHub trust its key) is every test's: test/support/operator-keys.ts.
export { OPERATOR, operatorKey, stranger, trustedKeys, operatorKeyFile } from "../support/operator-keys.ts";

export interface Ctx {
  redis: RedisClient;
  log: EventLog;
  prefix: string;
  session: string;
  turn: string;
  attempt: number;
  epoch: number;
  dir: string;
  hub?: DecisionHub;
  cleanup(): Promise<void>;
}

const rand = (): string => randomBytes(6).toString("hex");

export async function setup(): Promise<Ctx> {
  const redis = connectRedis({ redisOptions: { maxRetriesPerRequest: 2 } });
  const prefix = `tsdec-${rand()}:`;
  const log = createEventLog({ redis, prefix });
  const session = `s-${rand()}`;
  const turn = "t1";
  const { epoch, attempt } = await log.beginAttempt(session, turn);
  const dir = mkdtempSync(join(tmpdir(), "ts-dec-"));
  const ctx: Ctx = {
    redis,
    log,
    prefix,
    session,
    turn,
    attempt,
    epoch,
    dir,
    async cleanup() {
      await ctx.hub?.close();
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      rmSync(dir, { recursive: true, force: true });
      redis.disconnect();
    },
  };
  return ctx;
}

/** Runs `fn` with a fresh context (own Redis keys, directory, log) and cleans it up after. */
export async function withCtx(fn: (ctx: Ctx) => Promise<void>): Promise<void> {
  const ctx = await setup();
  try {
    await fn(ctx);
  } finally {
    await ctx.cleanup();
  }
}

export async function withHub(ctx: Ctx, options: Partial<DecisionHubOptions> = {}): Promise<DecisionHub> {
  ctx.hub = await startDecisionHub({
    log: ctx.log,
    redis: ctx.redis,
    prefix: ctx.prefix,
    operatorKeys: [OPERATOR.publicKey],
    ...options,
  });
  return ctx.hub;
}

/** decide() as the test operator, in ctx's session. */
export function decideAs(ctx: Ctx, input: Omit<DecideInput, "session"> & { session?: string }): Promise<DecideResult> {
  return decide({ log: ctx.log, operatorKey, trustedKeys }, { session: ctx.session, ...input });
}

/** Stores a rule signed by the test operator (`source`: the decision that added it, if any). */
export async function putRule(
  ctx: Pick<Ctx, "redis" | "prefix">,
  pattern: string,
  effect: "allow" | "deny" = "allow",
  by = "carol",
  source?: TrustRule["source"],
): Promise<TrustRule> {
  const rule = signRule(operatorKey, {
    id: ruleId(effect, pattern),
    pattern,
    effect,
    by,
    at: new Date().toISOString(),
    ...(source === undefined ? {} : { source }),
  });
  await new RuleStore(ctx.redis, ctx.prefix).put(rule);
  return rule;
}

/** A rule added "by a decision" in ctx's session (its `rule.added` is in the log), so it can be revoked. */
export async function revocableRule(ctx: Ctx, pattern: string, effect: "allow" | "deny" = "allow"): Promise<TrustRule> {
  const rule = await putRule(ctx, pattern, effect, "erin", { session: ctx.session, requestId: "req-1" });
  await ctx.log.append(ctx.session, ctx.epoch, [
    { turn: ctx.turn, attempt: ctx.attempt, kind: "rule.added", data: { ruleId: rule.id, pattern, effect } },
  ]);
  return rule;
}

export function prepare(ctx: Ctx, hub: DecisionHub, extra: Partial<SupervisedRunOptions> = {}): SupervisedRun {
  return prepareSupervisedRun(hub, {
    session: ctx.session,
    turn: ctx.turn,
    attempt: ctx.attempt,
    epoch: ctx.epoch,
    cwd: ctx.dir,
    tmpDir: ctx.dir,
    ...extra,
  });
}

/** Runs the hook forwarder on one PreToolUse call, as the CLI's hook does; resolves with the hub's answer. */
export function forward(
  run: SupervisedRun,
  toolInput: Record<string, unknown>,
  tool = "Bash",
): Promise<{ permissionDecision: string; permissionDecisionReason: string }> {
  const fwd = spawn(process.execPath, [FORWARDER_PATH, run.runFile], { stdio: ["pipe", "pipe", "ignore"] });
  let out = "";
  fwd.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  fwd.stdin.end(
    JSON.stringify({
      hook_event_name: "PreToolUse",
      tool_name: tool,
      tool_input: toolInput,
      tool_use_id: `toolu_${rand()}`,
    }),
  );
  return new Promise((resolve) => fwd.on("close", () => resolve(JSON.parse(out).hookSpecificOutput)));
}

export interface TurnResult {
  lines: Array<Record<string, any>>;
  toolResults: Array<{ content: string; isError: boolean; meta: unknown }>;
  result: Record<string, any> | undefined;
  denials: Array<{ tool_name: string; tool_use_id: string; tool_input: Record<string, unknown> }>;
}

export const bash = (command: string): ScriptResponse => ({
  content: [{ type: "tool_use", name: "Bash", input: { command, description: "test step" } }],
});

/** One real CLI turn under supervision: the scripted tool calls, then "finished". */
export interface TurnExtras {
  /** Laid over the CLI's hermetic env (e.g. what a hostile job would set). */
  env?: Record<string, string>;
  mcpConfigFile?: string;
}

/** The MCP server the tests start: `mcp__probe__touch` creates the file named by `path`. */
export const MCP_PROBE = join(import.meta.dirname, "_mcp-probe.mjs");

/** An MCP config file in ctx.dir that starts the probe server. */
export function mcpProbeConfig(dir: string): string {
  const file = join(dir, "mcp.json");
  writeFileSync(file, JSON.stringify({ mcpServers: { probe: { command: process.execPath, args: [MCP_PROBE] } } }));
  return file;
}

export async function supervisedTurn(
  ctx: Ctx,
  run: SupervisedRun,
  steps: ScriptResponse[],
  extraArgs: string[] = [],
  extras: TurnExtras = {},
): Promise<TurnResult> {
  const server = await startModelServer({
    script: { responses: [...steps, { content: [{ type: "text", text: "finished" }] }] },
  });
  const hermetic = hermeticEnv({ baseUrl: server.url });
  try {
    const handle = runTurn({
      cwd: ctx.dir,
      prompt: "do the steps",
      env: { ...hermetic.env, ...extras.env },
      mcpConfigFile: extras.mcpConfigFile,
      ...run.turnOptions,
      extraArgs: run.argsFilter(extraArgs),
      timeoutMs: 120_000,
    });
    const lines: Array<Record<string, any>> = [];
    for await (const parsed of handle.lines)
      if (parsed.category === "known" || parsed.category === "unknown") lines.push(parsed.line as Record<string, any>);
    await handle.outcome.catch(() => {});
    const toolResults: TurnResult["toolResults"] = [];
    for (const line of lines) {
      if (line["type"] !== "user") continue;
      for (const block of line["message"]?.["content"] ?? []) {
        if (block.type !== "tool_result") continue;
        const content = typeof block.content === "string" ? block.content : JSON.stringify(block.content);
        toolResults.push({ content, isError: block.is_error === true, meta: line["tool_result_meta"] });
      }
    }
    const result = lines.filter((l) => l["type"] === "result").at(-1);
    return { lines, toolResults, result, denials: (result?.["permission_denials"] ?? []) as TurnResult["denials"] };
  } finally {
    await server.close();
    hermetic.cleanup();
  }
}

export async function eventsOf(ctx: Ctx, kind?: string): Promise<Envelope[]> {
  const out: Envelope[] = [];
  for await (const ev of ctx.log.read(ctx.session)) if (kind === undefined || ev.kind === kind) out.push(ev);
  return out;
}

/** Resolves with the first event of `kind` from `fromSeq` on (tails the log; bounded). */
export async function nextEvent(ctx: Ctx, kind: string, fromSeq = 1, timeoutMs = 60_000): Promise<Envelope> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), timeoutMs);
  try {
    for await (const ev of ctx.log.tail(ctx.session, { fromSeq, signal: stop.signal, blockMs: 500 }))
      if (ev.kind === kind) return ev;
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
  throw new Error(`no ${kind} event within ${timeoutMs} ms`);
}

/** Live pids whose argv starts with `argv` after argv[0] (e.g. [forwarder, runFile]). */
export function pidsRunning(...argv: string[]): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (argv.every((a, i) => args[i + 1] === a)) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Polls `probe` every 20 ms until it returns a value other than undefined (bounded). */
export async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const BIN = join(import.meta.dirname, "../../src/bin/turnstream.ts");

/**
 * Runs the `turnstream` command line with `env` over this process's environment, less its TURNSTREAM_*
 * and REDIS_CLUSTER_NODES, so each test's command sees only the settings the test gives it.
 */
export function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && !name.startsWith("TURNSTREAM_") && name !== "REDIS_CLUSTER_NODES") clean[name] = value;
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...clean, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  return new Promise((r) => child.on("close", (code) => r({ code, stdout, stderr })));
}

/**
 * A "worker" in a process of its own holding a hub for `ctx`'s attempt (_hub-child.ts, fast heartbeat):
 * the process and the run file of its supervised run, once it has printed it.
 */
export async function startHubChild(ctx: Ctx): Promise<{ child: ChildProcess; runFile: string }> {
  const args = [ctx.prefix, ctx.session, ctx.turn, String(ctx.attempt), String(ctx.epoch), ctx.dir, OPERATOR.publicKey];
  const child = spawn(process.execPath, [join(import.meta.dirname, "_hub-child.ts"), ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout!.setEncoding("utf8");
  const runFile = await new Promise<string>((resolve) =>
    child.stdout!.on("data", (chunk: string) => ((out += chunk), out.includes("\n") && resolve(out.trim()))),
  );
  return { child, runFile };
}
