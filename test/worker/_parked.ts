// Helpers for tests that need a real parked turn: an in-process worker whose answer window is short, a
// scripted Bash call the supervised turn parks on, scenarios that share one stage, the parked request
// once it is listed, a signed decision for it, and the moment a worker has looked at a parked turn
// again and left it parked.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { decide, getPending, listPending, parseOperatorKeys, type PendingRequest } from "../../src/decisions/index.ts";
import { sessionKeys, type RedisClient } from "../../src/log/index.ts";
import { OPERATOR, operatorKey } from "../decisions/_support.ts";
import { waitUntil, type TestStage } from "./_support.ts";

/** The worker's parking options: a call unanswered for 300 ms parks; parked turns are looked over twice a second. */
export const PARKING = { answerWindowMs: 300, sweepMs: 500 };

/** What a worker needs to park supervised turns and trust OPERATOR's decisions. */
export const PARKING_WORKER = { operatorKeys: [OPERATOR.publicKey], parking: PARKING };

/** A scripted Bash call that appends `word` to `file`, answering only a prompt that holds `mark`. */
export const appendCall = (mark: string, file: string, word = "ran") => ({
  match: mark,
  content: [{ type: "tool_use" as const, name: "Bash", input: { command: `echo ${word} >> ${file}` } }],
});

/**
 * Scenarios that share a stage (one model server, one worker, one prefix) each run a turn of their own:
 * its prompt names the scenario, and the scenario's scripted responses answer only that prompt.
 */
export const scenarioPrompt = (scenario: string, text: string): string => `${scenario.toUpperCase()}-SCENARIO: ${text}`;
export const answering = (scenario: string): { match: string } => ({ match: `${scenario.toUpperCase()}-SCENARIO` });

/** A scenario's own folder under the stage's workspace root: its turn's cwd, and where its calls write. */
export function folderOf(stage: Pick<TestStage, "ws">, scenario: string): string {
  const dir = join(stage.ws, scenario);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** The session's parked request once its turn has parked on it (other than those in `besides`). */
export async function parkedRequest(
  redis: RedisClient,
  prefix: string,
  session: string,
  besides: readonly string[] = [],
): Promise<PendingRequest> {
  let found: PendingRequest | undefined;
  await waitUntil(
    async () => {
      found = (await listPending({ redis, prefix })).find(
        (p) => p.session === session && p.status === "parked" && !besides.includes(p.requestId),
      );
      return found !== undefined;
    },
    60_000,
    "a parked request",
  );
  return found!;
}

/** OPERATOR's signed decision on a request, as `turnstream decide` makes it. */
export async function decideParked(
  stage: TestStage,
  request: Pick<PendingRequest, "session" | "requestId">,
  decision: "allow" | "deny",
): Promise<void> {
  await decide(
    { log: stage.producer.log, redis: stage.redis, operatorKey, trustedKeys: parseOperatorKeys([OPERATOR.publicKey]) },
    { session: request.session, requestId: request.requestId, decision, by: "erin", reason: "checked" },
  );
}

/**
 * Waits until a worker has looked at the parked turn with the session's log up to `seq` and sent it
 * back to waiting (its request's entry then notes the log's head the worker read), or until the turn
 * is no longer parked. What a test asserts after a stray decision or wake-up holds from then on only
 * if the worker had it in hand: a fixed sleep would say nothing when the look came late.
 */
export async function lookedAtSince(
  redis: RedisClient,
  prefix: string,
  request: Pick<PendingRequest, "session" | "requestId">,
  seq: number,
): Promise<void> {
  await waitUntil(
    async () => {
      if ((await redis.hget(sessionKeys(prefix, request.session).meta, "state")) !== "parked") return true;
      const parked = (await getPending(redis, prefix, request.session, request.requestId))?.parked;
      return parked !== undefined && parked.seq >= seq;
    },
    30_000,
    `a worker's look at the parked turn with the log up to seq ${seq}`,
  );
}
