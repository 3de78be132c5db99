// How a projection state lives in Redis. One hash per session and projection version, under the
// session's hash tag (so the commit script touches it, the pointer and the log's meta in one slot):
//   <prefix>{s:<id>}:proj:v<N>:model   seq (checkpoint) · core · summary · turns · t:<i> per turn
//   <prefix>{s:<id>}:proj:ptr          the version readers use
// The state is split by turn so a commit writes the small core plus the turns the batch touched,
// not the whole history: a long session's commits stay proportional to what changed.
import type { RedisClient } from "../log/index.ts";
import { DEFAULT_PREFIX } from "../kernel/index.ts";
import { sessionKeys, sessionTag } from "../log/index.ts";
import { luaScript, scriptCommand } from "../log/index.ts";
import {
  STATE_VERSION,
  summaryOf,
  type ProjectionState,
  type SessionSummary,
  type TurnView,
  type TranscriptTurn,
} from "./state.ts";

/** The projection version written by default: bump STATE_VERSION and the projector rebuilds into new keys. */
export const PROJECTION_VERSION: number = STATE_VERSION;

export interface ProjectionKeys {
  model: string;
  pointer: string;
  logMeta: string;
  modelOf(version: number): string;
}

export function projectionKeys(prefix: string, session: string, version: number): ProjectionKeys {
  const tag = sessionTag(prefix, session);
  const modelOf = (v: number): string => `${tag}:proj:v${v}:model`;
  return { model: modelOf(version), pointer: `${tag}:proj:ptr`, logMeta: sessionKeys(prefix, session).meta, modelOf };
}

interface TurnPart {
  view: TurnView;
  transcript: TranscriptTurn;
  paths: Record<string, Record<string, number[]>>;
}

/** Field/value pairs for a commit: core, summary, and the given turns (all when `turns` is undefined). */
export function encodeState(projectionState: ProjectionState, turns?: Iterable<number>): string[] {
  const { view, transcript, cursor } = projectionState;
  const core = {
    ...projectionState,
    view: { ...view, turns: [] },
    transcript: { turns: [] },
    cursor: { ...cursor, toolPaths: {} },
  };
  const out = [
    "core",
    JSON.stringify(core),
    "summary",
    JSON.stringify(summaryOf(projectionState)),
    "turns",
    String(view.turns.length),
  ];
  const pathsByTurn = new Map<number, Record<string, Record<string, number[]>>>();
  for (const key of Object.keys(cursor.toolPaths)) {
    const ti = Number(key.slice(0, key.indexOf(":")));
    let paths = pathsByTurn.get(ti);
    if (paths === undefined) pathsByTurn.set(ti, (paths = {}));
    paths[key] = cursor.toolPaths[key]!;
  }
  const list = turns ?? view.turns.keys();
  for (const turnIndex of list) {
    const part: TurnPart = {
      view: view.turns[turnIndex]!,
      transcript: transcript.turns[turnIndex]!,
      paths: pathsByTurn.get(turnIndex) ?? {},
    };
    out.push(`t:${turnIndex}`, JSON.stringify(part));
  }
  return out;
}

/** Rebuilds a state from the stored hash (HGETALL), or undefined when nothing is stored. */
export function decodeState(hash: Record<string, string>): ProjectionState | undefined {
  const core = hash["core"];
  if (core === undefined) return undefined;
  const decoded = JSON.parse(core) as ProjectionState;
  const turnCount = Number(hash["turns"] ?? 0);
  for (let turnIndex = 0; turnIndex < turnCount; turnIndex++) {
    const raw = hash[`t:${turnIndex}`];
    if (raw === undefined)
      throw new Error(`stored projection is missing turn ${turnIndex}; delete its keys and let the projector rebuild`);
    const part = JSON.parse(raw) as TurnPart;
    decoded.view.turns.push(part.view);
    decoded.transcript.turns.push(part.transcript);
    Object.assign(decoded.cursor.toolPaths, part.paths);
  }
  return decoded;
}

export type CommitOutcome = "committed" | "conflict" | "superseded" | "repoint";

export interface CommitReply {
  outcome: CommitOutcome;
  /** committed: 1 when the pointer switched to this version; conflict: stored seq; else the pointer. */
  n: number;
}

const COMMIT = luaScript("turnstreamProjectionCommit", 4, new URL("./lua/commit.lua", import.meta.url));

export async function commitProjection(
  redis: RedisClient,
  keys: ProjectionKeys,
  version: number,
  expectedSeq: number,
  pointerSeen: number | null,
  state: ProjectionState,
  turns: Iterable<number> | undefined,
): Promise<CommitReply> {
  const commit = scriptCommand<[string, number]>(redis, COMMIT);
  const old = pointerSeen !== null && pointerSeen !== version ? keys.modelOf(pointerSeen) : keys.model;
  const argv = [version, expectedSeq, state.lastSeq, pointerSeen === null ? "" : String(pointerSeen)];
  for (const field of encodeState(state, turns)) argv.push(field);
  const [outcome, written] = await commit([keys.model, keys.pointer, keys.logMeta, old], argv);
  return { outcome: outcome as CommitOutcome, n: Number(written) };
}

export async function readPointer(redis: RedisClient, keys: ProjectionKeys): Promise<number | null> {
  const pointer = await redis.get(keys.pointer);
  return pointer === null ? null : Number(pointer);
}

export interface ReadModel {
  version: number;
  seq: number;
  state: ProjectionState;
}

export interface ReadModelOptions {
  /** Event log key prefix (default "ts:"). */
  prefix?: string;
  /** Read this version's keys instead of the pointer's. */
  version?: number;
}

/**
 * The current read models of a session as the live projector stored them, or undefined when none
 * are stored yet. Follows the version pointer (retrying once if it switches while reading).
 */
export async function readModel(
  redis: RedisClient,
  session: string,
  options: ReadModelOptions = {},
): Promise<ReadModel | undefined> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  for (let tries = 0; tries < 3; tries++) {
    const base = projectionKeys(prefix, session, 1);
    const version = options.version ?? (await readPointer(redis, base));
    if (version === null) return undefined;
    const hash = await redis.hgetall(base.modelOf(version));
    const state = decodeState(hash);
    if (state !== undefined) return { version, seq: Number(hash["seq"] ?? 0), state };
    if (options.version !== undefined) return undefined;
  }
  return undefined;
}

/**
 * `fields` of a session's current read model, or undefined when none is stored. Follows the version
 * pointer, retrying when the model it names is gone (the pointer switched while reading) — the first
 * field tells: a stored model always has it.
 */
export async function readModelFields(
  redis: RedisClient,
  session: string,
  prefix: string,
  fields: readonly [string, ...string[]],
): Promise<(string | null)[] | undefined> {
  for (let tries = 0; tries < 3; tries++) {
    const base = projectionKeys(prefix, session, 1);
    const version = await readPointer(redis, base);
    if (version === null) return undefined;
    const values = await redis.hmget(base.modelOf(version), ...fields);
    if (values[0] !== null) return values;
  }
  return undefined;
}

/** The stored listing summary of a session (cheap: one small field), or undefined. */
export async function readSummary(
  redis: RedisClient,
  session: string,
  prefix = DEFAULT_PREFIX,
): Promise<SessionSummary | undefined> {
  const [summary] = (await readModelFields(redis, session, prefix, ["summary"])) ?? [];
  return summary == null ? undefined : (JSON.parse(summary) as SessionSummary);
}

/** Deletes a session's projection keys of the given versions and the pointer (operators, tests). */
export async function deleteProjection(
  redis: RedisClient,
  session: string,
  versions: number[],
  prefix = DEFAULT_PREFIX,
): Promise<void> {
  const projection = projectionKeys(prefix, session, 1);
  for (const modelVersion of versions) await redis.del(projection.modelOf(modelVersion));
  await redis.del(projection.pointer);
}
