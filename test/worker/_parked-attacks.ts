// Helpers for the attacks on parked turns: scripted tool calls whose effects can be counted, deciding as
// the trusted operator, and reading or rewriting what a parked turn resumes from (its request, its
// turn.parked, its session file), as someone with Redis write would. Waiting for a parked request and
// for a worker's look at one: _parked.ts.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import {
  decide,
  getPending,
  listPending,
  parseOperatorKeys,
  type AclRole,
  type PendingEntry,
} from "../../src/decisions/index.ts";
import {
  decisionMadeData,
  decisionRequestedData,
  turnParkedData,
  type DecisionMade,
  type DecisionRequested,
  type TurnParkedData,
} from "../../src/events/index.ts";
import { sessionKeys, type EventLog, type RedisClient } from "../../src/log/index.ts";
import { createProducer, type Producer, type TurnResult } from "../../src/queue/index.ts";
import { startModelServer, type ModelServer, type ModelServerOptions } from "../../src/testing/index.ts";
import { startTurnWorker, type TurnWorker, type TurnWorkerOptions } from "../../src/worker/index.ts";
import { assembleSnapshot, snapshotData } from "../../src/worker/snapshots.ts";
import { startAclRedis } from "../decisions/_acl-redis.ts";
import { OPERATOR, operatorKey } from "../decisions/_support.ts";
import { cliEnv, readAll, testSpace, type TestSpace } from "./_support.ts";

/** A Bash call that appends `word` to `file`: how many lines the file has is how many times it ran. */
export const appendTo = (file: string, word: string) => ({
  type: "tool_use" as const,
  name: "Bash",
  input: { command: `echo ${word} >> ${file}` },
});
export const say = (text: string) => ({ content: [{ type: "text" as const, text }] });
export const linesOf = (file: string): string[] =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

/** The trusted operator's signed decision, recorded through `log` (and its Redis). */
export function decideAs(
  log: EventLog,
  redis: RedisClient,
  target: { session: string; requestId: string },
  decision: "allow" | "deny",
  reason = "",
) {
  return decide(
    { log, redis, operatorKey, trustedKeys: parseOperatorKeys([OPERATOR.publicKey]) },
    { session: target.session, requestId: target.requestId, decision, by: "erin", reason },
  );
}

/** The session's events of `kind`, with their data parsed. */
export async function eventsOf<T>(
  log: EventLog,
  session: string,
  kind: string,
  parse: (data: unknown) => T,
): Promise<Array<{ seq: number; turn: string; attempt: number; epoch: number; data: T }>> {
  return (await readAll(log, session))
    .filter((e) => e.kind === kind)
    .map((e) => ({ seq: e.seq, turn: e.turn, attempt: e.attempt, epoch: e.epoch, data: parse(e.data) }));
}

export const requestsOf = (log: EventLog, session: string) =>
  eventsOf<DecisionRequested>(log, session, "decision.requested", (d) => decisionRequestedData.parse(d));
export const decisionsOf = (log: EventLog, session: string) =>
  eventsOf<DecisionMade>(log, session, "decision.made", (d) => decisionMadeData.parse(d));
export const parksOf = (log: EventLog, session: string) =>
  eventsOf<TurnParkedData>(log, session, "turn.parked", (d) => turnParkedData.parse(d));

/** The session's meta fields that say where it stands. */
export async function metaOf(redis: RedisClient, prefix: string, session: string): Promise<Record<string, string>> {
  return redis.hgetall(sessionKeys(prefix, session).meta);
}

/** The session file the session's latest snapshot holds, and the CLI session it belongs to. */
export async function latestSessionFile(
  log: EventLog,
  redis: RedisClient,
  prefix: string,
  session: string,
): Promise<{ text: string; cliSessionId: string }> {
  const meta = await metaOf(redis, prefix, session);
  const snapshot = (await assembleSnapshot(log, session, Number(meta["snap"]!.split("|")[0])))!;
  return { text: snapshot.bytes.toString("utf8"), cliSessionId: snapshot.cliSessionId };
}

/**
 * Appends events to a session's log at its current epoch, as anyone who may write the log can (the
 * operator role included: it reads the epoch like everything else). Returns the seq of the last one.
 */
export async function forge(
  log: EventLog,
  redis: RedisClient,
  session: string,
  events: ReadonlyArray<{ turn: string; attempt: number; kind: string; data: unknown }>,
): Promise<number> {
  const epoch = Number((await metaOf(redis, log.prefix, session))["epoch"] ?? 0);
  const appended = await log.append(session, epoch, events);
  assert.equal(appended.outcome, "appended", `the forged events were not appended: ${appended.outcome}`);
  return appended.lastSeq;
}

/** A session.snapshot event holding `text` as the session file, for `forge`. */
export function snapshotEvent(turn: string, attempt: number, text: string, cliSessionId: string, cwd: string) {
  const data = { ...snapshotData(Buffer.from(text, "utf8"), cliSessionId, undefined), cwd };
  return { turn, attempt, kind: "session.snapshot", data };
}

/** The input of the tool_use `toolUseId` in a session file (its last mention: the pending call). */
export function toolInputIn(sessionFile: string, toolUseId: string): Record<string, unknown> {
  let input: Record<string, unknown> | undefined;
  for (const line of sessionFile.split("\n")) {
    if (!line.includes(toolUseId)) continue;
    const entry = JSON.parse(line) as { message?: { content?: unknown } };
    const content = Array.isArray(entry.message?.content) ? (entry.message.content as Record<string, unknown>[]) : [];
    for (const block of content)
      if (block["type"] === "tool_use" && block["id"] === toolUseId) input = block["input"] as Record<string, unknown>;
  }
  if (input === undefined) throw new Error(`no tool_use ${toolUseId} in the session file`);
  return input;
}

/** The pending-index entry of a request as stored (parked or not), for rewriting it. */
export async function storedEntry(
  redis: RedisClient,
  prefix: string,
  session: string,
  requestId: string,
): Promise<PendingEntry> {
  const entry = await getPending(redis, prefix, session, requestId);
  if (entry === undefined) throw new Error(`no pending entry for ${requestId}`);
  return entry;
}

/**
 * A stage on a private Redis that enforces the ACL roles: the producer and the worker log in as
 * `worker`; `as(role)` gives a client of another role (the honest operator's, the attacker's).
 */
export interface AclStage {
  space: TestSpace;
  ws: string;
  server: ModelServer;
  producer: Producer;
  /** The worker role's client (the producer's and the worker's). */
  redis: RedisClient;
  as(role: AclRole): RedisClient;
  /** An in-process worker on the stage (closed by dispose). */
  worker(extra?: Partial<TurnWorkerOptions>): TurnWorker;
  dispose(): Promise<void>;
}

export async function aclStage(script: (ws: string) => ModelServerOptions["script"]): Promise<AclStage> {
  const space = testSpace();
  const ws = space.workspace();
  const acl = await startAclRedis(space);
  const server = await startModelServer({ script: script(ws) });
  const redis = acl.client("worker");
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const workers: TurnWorker[] = [];
  return {
    space,
    ws,
    server,
    producer,
    redis,
    as: (role) => acl.client(role),
    worker(extra = {}) {
      const worker = startTurnWorker({
        redis,
        logPrefix: space.logPrefix,
        queuePrefix: space.queuePrefix,
        workspaceRoots: [ws],
        instanceRoot: space.dir(`inst-${workers.length}`),
        ...extra,
        runEnv: { ...cliEnv(server.url), ...extra.runEnv },
      });
      workers.push(worker);
      return worker;
    },
    async dispose() {
      await Promise.all(workers.map((w) => w.close({ graceMs: 1000 })));
      await producer.close();
      await server.close();
      await acl.close();
      space.cleanup();
    },
  };
}

/**
 * Waits for the turn to end, deciding each request it parks on (those in `besides` excepted) as
 * `decision`, once: the turn's result. A safe product may ask again rather than use an allow twice.
 */
export async function endDecidingParks(
  where: { producer: Producer; redis: RedisClient; prefix: string },
  target: { session: string; turn: string },
  decision: "allow" | "deny",
  besides: readonly string[] = [],
): Promise<TurnResult> {
  const { producer, redis, prefix } = where;
  const seen = new Set(besides);
  let result: TurnResult | undefined;
  let failure: unknown;
  const ended = producer.waitForTurn(target.turn, { timeoutMs: 90_000 }).then(
    (r) => void (result = r),
    (err: unknown) => void (failure = err),
  );
  while (result === undefined && failure === undefined) {
    for (const request of await listPending({ redis, prefix }))
      if (request.session === target.session && request.status === "parked" && !seen.has(request.requestId)) {
        seen.add(request.requestId);
        await decideAs(producer.log, redis, request, decision, "decided while the turn went on");
      }
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 200))]);
  }
  if (failure !== undefined) throw failure;
  return result!;
}
