// A consumer's TypeScript, type-checked against the published declarations only: the names the
// README uses resolve, their types are real (a wrong option is an error), and each subpath works.
import {
  connectRedis,
  createProducer,
  createScrubber,
  runTurn,
  startTurnWorker,
  type EnqueueResult,
  type TurnOutcome,
  type TurnResult,
} from "turnstream";
import { parseLine, type ParsedLine } from "turnstream/protocol";
import { startModelServer, type ModelServer } from "turnstream/testing";
// The entries by audience: each declares what its role uses, with the same types as the root's.
import {
  runThreadTurn,
  InMemorySessionStore,
  runTurn as runTurnFromRunner,
  type RunTurnOptions,
} from "turnstream/runner";
import { createProducer as createProducerFromEntry, type Producer } from "turnstream/producer";
import { startTurnWorker as startWorkerFromEntry, type GatewayPolicy } from "turnstream/worker";
import { createEventLog, replaySession, type Envelope } from "turnstream/log";
import { isTerminalKind, type EventKind } from "turnstream/events";

export async function enqueueOne(): Promise<TurnResult> {
  const producer = createProducer({ redis: connectRedis() });
  const queued: EnqueueResult = await producer.enqueueTurn({
    prompt: "hi",
    cwd: "/work/repo",
    options: { maxTurns: 2 },
  });
  // @ts-expect-error maxTurns is a number
  await producer.enqueueTurn({ prompt: "hi", cwd: "/work/repo", options: { maxTurns: "two" } });
  return producer.waitForTurn(queued.turn, { timeoutMs: 1000 });
}

export function worker(): ReturnType<typeof startTurnWorker> {
  return startTurnWorker({ redis: connectRedis(), workspaceRoots: ["/work"], concurrency: 2 });
}

export async function oneTurn(): Promise<TurnOutcome> {
  const server: ModelServer = await startModelServer({ script: { responses: [] } });
  const turn = runTurn({ cwd: "/work/repo", prompt: "hi", env: { ANTHROPIC_BASE_URL: server.url } });
  for await (const line of turn.lines) line.type satisfies string;
  return turn.outcome;
}

export const parsed: ParsedLine = parseLine('{"type":"system","subtype":"init"}');
export const scrubbed: string = createScrubber({ values: { TOKEN: "s3cret-value" } }).scrub("s3cret-value");

export const sameRunTurn: typeof runTurn = runTurnFromRunner;
export const runnerOptions: RunTurnOptions = { cwd: "/work/repo", prompt: "hi" };
export function thread(): ReturnType<typeof runThreadTurn> {
  return runThreadTurn({ ...runnerOptions, threadId: "t1", store: new InMemorySessionStore() });
}
export function producerFromEntry(): Producer {
  return createProducerFromEntry({ redis: connectRedis() });
}
export const sameWorker: typeof startTurnWorker = startWorkerFromEntry;
export const allowAll: GatewayPolicy = { beforeRequest: () => ({ action: "allow" }) };
export async function endingKind(session: string): Promise<string | undefined> {
  const log = createEventLog({ redis: connectRedis() });
  await replaySession(log, session);
  let last: Envelope | undefined;
  for await (const event of log.read(session)) last = event;
  return last !== undefined && isTerminalKind(last.kind) ? last.kind : undefined;
}
export const finished: EventKind = "turn.finished";
