// A worker's instance id, held for as long as the process lives. Without TURNSTREAM_INSTANCE_ID a
// worker takes the lowest numbered id (`worker-<host>-<n>`) no live process on this host holds, so a
// worker restarted after a crash gets its id back and sweeps what its dead run left.
//
// Holding an id is one claim file in `<instanceRoot>/instances/<id>/owner/`, named by the claiming
// process (pid, start time, a random tail), so no two processes ever write the same file and a dead
// process's claim can be deleted by anyone without a race. A claim wins when no other live claim sits
// beside it; two processes claiming at once both see each other and both step back, then try again.
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { instanceStem, TurnstreamError } from "../kernel/index.ts";
import { lockState, ownLockContent, readLock, writeLock, type LockContent } from "./live-lock.ts";

const OWNER_DIR = "owner";
/** Slots tried before giving up: far more workers than one host runs. */
const MAX_SLOTS = 1000;
/** Times a slot is tried again after a claim that met another at the same moment. */
const MAX_RETRIES = 8;

export interface InstanceSlot {
  readonly instanceId: string;
  /** Gives the id up (a clean close). Never throws. */
  release(): void;
}

export class InstanceIdTakenError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "instance_id_taken" });
  }
}

/** `worker-<host>`: the default ids' stem, the host name made safe for a folder name. */
export function defaultInstanceStem(): string {
  return instanceStem("worker");
}

function ownerDir(root: string, instanceId: string): string {
  return join(root, "instances", instanceId, OWNER_DIR);
}

function removeQuietly(path: string): void {
  try {
    rmSync(path, { force: true });
  } catch {
    // left for the next claim or sweep
  }
}

/** The live claims in an owner folder other than `except`; dead ones are deleted on the way unless `keepDead`. */
function liveClaims(dir: string, except?: string, keepDead = false): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const live: string[] = [];
  for (const name of names) {
    if (name === except || !name.endsWith(".lock")) continue;
    const state = lockState(join(dir, name));
    if (state === "live") live.push(name);
    // Its name is its dead owner's alone: nobody else will ever write it again.
    else if (state === "dead" && !keepDead) removeQuietly(join(dir, name));
  }
  return live;
}

/** The process holding an instance id, if a live one does. */
export function instanceHolder(root: string, instanceId: string): LockContent | undefined {
  const dir = ownerDir(root, instanceId);
  for (const name of liveClaims(dir, undefined, true)) {
    const lock = readLock(join(dir, name));
    if (typeof lock === "object") return lock;
  }
  return undefined;
}

/** One attempt at the id: true when this process now holds it. */
function tryClaim(dir: string, claim: string): boolean {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeLock(join(dir, claim), ownLockContent());
  if (liveClaims(dir, claim).length === 0) return true;
  unlinkSync(join(dir, claim));
  return false;
}

/** Claims the id; retries while the only other claims are ones that step back as this one did. */
async function claim(root: string, instanceId: string): Promise<InstanceSlot | undefined> {
  const dir = ownerDir(root, instanceId);
  const file = `${process.pid}.${randomBytes(6).toString("hex")}.lock`;
  for (let attempt = 0; attempt <= MAX_RETRIES; attempt++) {
    if (tryClaim(dir, file)) {
      return {
        instanceId,
        release: () => removeQuietly(join(dir, file)),
      };
    }
    // Lost to a claim made at the same moment, or to a holder: after a random pause, a holder is
    // still there and the other claimant of a tie has stepped back.
    await sleep(5 + Math.floor(Math.random() * 40));
    if (liveClaims(dir).length > 0) return undefined;
  }
  return undefined;
}

/**
 * Holds `instanceId`, or without one the lowest free `worker-<host>-<n>`. An id a live process on this
 * host holds is refused (InstanceIdTakenError): two workers sharing one would share its folders.
 */
export async function claimInstanceSlot(options: {
  instanceRoot: string;
  instanceId?: string | undefined;
}): Promise<InstanceSlot> {
  const root = options.instanceRoot;
  if (options.instanceId !== undefined) {
    const slot = await claim(root, options.instanceId);
    if (slot !== undefined) return slot;
    const holder = instanceHolder(root, options.instanceId);
    throw new InstanceIdTakenError(
      `instance id ${options.instanceId} is held by a running process${holder === undefined ? "" : ` (pid ${holder.pid})`} under ${root}`,
    );
  }
  const stem = defaultInstanceStem();
  for (let index = 0; index < MAX_SLOTS; index++) {
    const id = `${stem}-${index}`;
    if (liveClaims(ownerDir(root, id)).length > 0) continue;
    const slot = await claim(root, id);
    if (slot !== undefined) return slot;
  }
  throw new InstanceIdTakenError(`no free instance id ${stem}-<n> under ${root} (n < ${MAX_SLOTS})`);
}
