// Helpers for tests that need a real parked turn: an in-process worker whose answer window is short, a
// scripted Bash call the supervised turn parks on, the parked request once it is listed, and a signed
// decision for it.
import { decide, listPending, parseOperatorKeys, type PendingRequest } from "../../src/decisions/index.ts";
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

/** The session's parked request, once its turn has parked on it (listed by `listPending`). */
export async function parkedRequest(stage: TestStage, session: string): Promise<PendingRequest> {
  let found: PendingRequest | undefined;
  await waitUntil(
    async () => {
      found = (await listPending({ redis: stage.redis, prefix: stage.space.logPrefix })).find(
        (p) => p.session === session && p.status === "parked",
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
