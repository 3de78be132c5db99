// Helpers for the retry, lost-session and shutdown tests: an in-process worker against a scripted
// model server with its own prefixes, and small readers over one turn's events.
import { createProducer, type Producer } from "../../src/queue/index.ts";
import { startTurnWorker, type TurnWorker, type TurnWorkerOptions } from "../../src/worker/index.ts";
import { startModelServer, type ModelServer } from "../../src/testing/index.ts";
import type { Envelope, RedisClient } from "../../src/log/index.ts";
import { cleanupKeys, cliEnv, readAll, redisFor, testSpace, type TestSpace } from "./_support.ts";

export interface Rig {
  space: TestSpace;
  server: ModelServer;
  redis: RedisClient;
  producer: Producer;
  ws: string;
  /** Starts an in-process worker on the rig's prefixes; closed by dispose(). */
  worker(extra?: Partial<TurnWorkerOptions>): TurnWorker;
  events(session: string, turn?: string): Promise<Envelope[]>;
  dispose(): Promise<void>;
}

export async function rig(script: unknown): Promise<Rig> {
  const space = testSpace();
  const server = await startModelServer({ script });
  const redis = redisFor();
  const producer = createProducer({ redis, logPrefix: space.logPrefix, queuePrefix: space.queuePrefix });
  const ws = space.workspace();
  const workers: TurnWorker[] = [];
  let n = 0;
  return {
    space,
    server,
    redis,
    producer,
    ws,
    worker(extra = {}) {
      const w = startTurnWorker({
        redis,
        logPrefix: space.logPrefix,
        queuePrefix: space.queuePrefix,
        workspaceRoots: [ws],
        instanceRoot: space.dir(`inst-${n++}`),
        ...extra,
        runEnv: { ...cliEnv(server.url), ...extra.runEnv },
      });
      workers.push(w);
      return w;
    },
    async events(session, turn) {
      const all = await readAll(producer.log, session);
      return turn === undefined ? all : all.filter((e) => e.turn === turn);
    },
    async dispose() {
      await Promise.all(workers.map((w) => w.close({ graceMs: 1000 })));
      await producer.close();
      await cleanupKeys(redis, space);
      redis.disconnect();
      await server.close();
      space.cleanup();
    },
  };
}

export const dataOf = (e: Envelope): Record<string, unknown> => (e.data ?? {}) as Record<string, unknown>;

export const kindsOf = (events: Envelope[]): string[] => events.filter((e) => e.kind !== "cli.line" && e.kind !== "cli.stderr").map((e) => e.kind);

/** Parsed stdout lines of one attempt. */
export function cliLines(events: Envelope[], attempt: number): Record<string, unknown>[] {
  return events
    .filter((e) => e.kind === "cli.line" && e.attempt === attempt)
    .map((e) => JSON.parse(String(dataOf(e)["raw"])) as Record<string, unknown>);
}

export const atMs = (e: Envelope): number => Date.parse(e.at);
