// Re-running logged turns: each recorded turn's responses are served by a scripted model server of its
// own, and its prompt runs through an in-process worker (the real CLI, real tools, the given cwd) on
// keys of its own under the same Redis, so the re-run's events have the same shape as the recording's
// and are compared by the same rules (src/rerun). Nothing of the re-run stays in Redis afterwards.
// The recording is untrusted (src/rerun/trust.ts): the cwd and the permission mode are the operator's,
// and a recorded turn that ran with more than that is refused before anything runs.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionHistory } from "../../archive/index.ts";
import { createEventLog, type Envelope, type RedisClient } from "../../log/index.ts";
import { createProducer, type Producer } from "../../queue/index.ts";
import {
  compareRuns,
  recordedTurns,
  RecordingRefusedError,
  refusalOf,
  scriptFromTurns,
  type RecordedTurn,
  type RerunComparison,
  type RerunPermissionMode,
} from "../../rerun/index.ts";
import { hermeticEnv, startModelServer } from "../../testing/index.ts";
import { startTurnWorker, type TurnWorker } from "../../worker/index.ts";
import { readSession } from "./_connect.ts";

export interface RerunOptions {
  redis: RedisClient;
  /** Where the recorded session's log is (the re-run's own keys go under the same Redis). */
  logPrefix: string;
  /** Where the recorded session is read: its log, or the archive once retention moved it (default the log). */
  history?: SessionHistory | undefined;
  session: string;
  /** A turn id, or its 1-based number in the session; default every turn. */
  turn?: string | undefined;
  /** Where the re-run works: the operator's, never the recording's (an edited log could name any directory). */
  cwd: string;
  /** The permission mode the operator grants (default `default`); a turn recorded in another mode is refused. */
  permissionMode?: RerunPermissionMode | undefined;
  /** How long one turn may take (default 10 minutes). */
  turnTimeoutMs?: number | undefined;
  /** Stops waiting for the re-run's turn (the re-run then throws the signal's reason). */
  signal?: AbortSignal | undefined;
  /** Each event of the re-run's turns as it is logged, for progress. */
  onEvent?: ((event: Envelope) => void) | undefined;
}

export interface RerunResult {
  session: string;
  /** The session the re-run ran as (its keys are gone once the re-run is over). */
  rerunSession: string;
  cwd: string;
  /** The permission mode the re-run ran in. */
  permissionMode: RerunPermissionMode;
  /** The session was imported (`turnstream import`): its recording is untrusted. */
  imported: boolean;
  comparison: RerunComparison;
  seconds: number;
}

const TURN_TIMEOUT_MS = 10 * 60_000;

/** What is wrong with `dir` as the place a re-run works, or undefined when it is a directory. */
export function workspaceProblem(dir: string): string | undefined {
  try {
    return statSync(dir).isDirectory() ? undefined : `${dir} is not a directory`;
  } catch {
    return `${dir} does not exist`;
  }
}

async function deleteKeys(redis: RedisClient, patterns: readonly string[]): Promise<void> {
  for (const pattern of patterns) {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 500);
      cursor = next;
      if (keys.length > 0) await Promise.all(keys.map((k) => redis.del(k)));
    } while (cursor !== "0");
  }
}

interface Space {
  redis: RedisClient;
  logPrefix: string;
  queuePrefix: string;
  root: string;
  worker: TurnWorker;
  producer: Producer;
}

function openSpace(redis: RedisClient, cwd: string, mode: RerunPermissionMode): Space {
  const tag = `rerun-${randomBytes(6).toString("hex")}`;
  const root = mkdtempSync(join(tmpdir(), "turnstream-rerun-"));
  const logPrefix = `ts-${tag}:`;
  const queuePrefix = `{ts-${tag}}`;
  const worker = startTurnWorker({
    redis,
    logPrefix,
    queuePrefix,
    workspaceRoots: [cwd],
    instanceRoot: join(root, "instances"),
    // Claimed only when the operator granted bypassPermissions (as root the CLI needs it to skip permissions).
    sandboxed: mode === "bypassPermissions",
    retry: { maxAttempts: 1 },
    allowEnv: ["ANTHROPIC_BASE_URL"],
    // Offline, no retries (a recorded API error is one answer); each turn names its own model server.
    runEnv: hermeticEnv({ root: join(root, "cli") }).env,
    heartbeatMs: 60_000,
  });
  return {
    redis,
    logPrefix,
    queuePrefix,
    root,
    worker,
    producer: createProducer({ redis, logPrefix, queuePrefix, allowEnv: ["ANTHROPIC_BASE_URL"] }),
  };
}

async function closeSpace(redis: RedisClient, space: Space): Promise<void> {
  await space.worker.close({ graceMs: 1000 });
  await space.producer.close();
  await deleteKeys(redis, [`${space.logPrefix}*`, `${space.queuePrefix}*`]);
  rmSync(space.root, { recursive: true, force: true });
}

/** Runs one recorded turn again against its own script; the re-run's turn and the server's divergence, if any. */
async function rerunTurn(
  space: Space,
  recorded: RecordedTurn,
  session: string,
  rerunOptions: RerunOptions & { permissionMode: RerunPermissionMode },
): Promise<{ turn: RecordedTurn | undefined; divergence: string | undefined }> {
  const { cwd, permissionMode } = rerunOptions;
  const server = await startModelServer({ script: scriptFromTurns([recorded], { cwd }) });
  try {
    // Only the model comes from the recording; the permissions are the operator's grant.
    const permissions =
      permissionMode === "bypassPermissions"
        ? { skipPermissions: true }
        : permissionMode === "default"
          ? {}
          : { permissionMode };
    const model = recorded.model === undefined ? {} : { model: recorded.model };
    const options = { ...model, ...permissions, env: { ANTHROPIC_BASE_URL: server.url } };
    const queued = await space.producer.enqueueTurn({ session, prompt: recorded.prompt, cwd, options });
    await space.producer.waitForTurn(queued.turn, {
      session,
      timeoutMs: rerunOptions.turnTimeoutMs ?? TURN_TIMEOUT_MS,
      signal: rerunOptions.signal,
      onEvent: rerunOptions.onEvent,
    });
    const events = await readSession(createEventLog({ redis: space.redis, prefix: space.logPrefix }), session);
    return {
      turn: recordedTurns(events, queued.turn)[0],
      divergence: server.requests().find((r) => r.diverged !== undefined)?.diverged,
    };
  } finally {
    await server.close();
  }
}

/** Re-runs the recorded turns one after another (later turns resume the re-run's session) and compares. */
export async function rerunSession(options: RerunOptions): Promise<RerunResult> {
  const started = Date.now();
  const history =
    options.history ??
    new SessionHistory(createEventLog({ redis: options.redis, prefix: options.logPrefix }), undefined);
  const events = await readSession(history, options.session);
  const recorded = recordedTurns(events, options.turn);
  const { cwd } = options;
  const permissionMode = options.permissionMode ?? "default";
  // `turnstream import` marks every import: such a log is what someone's file said.
  const imported = (await history.importedAt(options.session)) !== undefined;
  // The archive's word that a session was not imported is no better than the archive: fail closed,
  // whether the session is read from it or was restored from it into Redis.
  const archived =
    (await history.home(options.session)) === "archive" || (await history.restoredAt(options.session)) !== undefined;
  const refused = refusalOf(recorded, { permissionMode, imported, archived, session: options.session });
  if (refused !== undefined) throw new RecordingRefusedError(refused);
  const space = openSpace(options.redis, cwd, permissionMode);
  const rerunSessionId = `rerun-${randomBytes(8).toString("hex")}`;
  try {
    const turns: Array<RecordedTurn | undefined> = [];
    const divergences: Array<string | undefined> = [];
    for (const recordedTurn of recorded) {
      const rerunOutcome = await rerunTurn(space, recordedTurn, rerunSessionId, { ...options, permissionMode });
      turns.push(rerunOutcome.turn);
      divergences.push(rerunOutcome.divergence);
    }
    const comparison = compareRuns(recorded, turns, divergences);
    const seconds = (Date.now() - started) / 1000;
    return {
      session: options.session,
      rerunSession: rerunSessionId,
      cwd,
      permissionMode,
      imported,
      comparison,
      seconds,
    };
  } finally {
    await closeSpace(options.redis, space);
  }
}
