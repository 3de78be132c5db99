// The shapes the worker's steps share: what a job runs with (ExecuteDeps), how a running turn is
// stopped, and how an attempt ended.
import type { DecisionHub, ParkedCall } from "../decisions/index.ts";
import type { EventObserver } from "../events/index.ts";
import type { Logger } from "../kernel/index.ts";
import type { EventLog } from "../log/index.ts";
import type { SessionOrder } from "../queue/index.ts";
import type { Scrubber } from "../telemetry/index.ts";
import type { CliSlot } from "./cli-slots.ts";
import type { CliTelemetryAccess, WorkerCliTelemetry } from "./cli-telemetry.ts";
import type { RunAccess, WorkerModelAccess } from "./model-access.ts";
import type { WorkerSettings } from "./options.ts";
import type { SnapshotCache } from "./snapshots.ts";
import type { WorkerTenants } from "./tenancy.ts";
import type { WarmSessions, WarmUse } from "./warm.ts";

/** log_rolled_back: the attempt's writer found the log behind what it had been acknowledged (Redis lost writes). */
/** log_not_durable: an append was applied but not confirmed at the log's durability level (TURNSTREAM_DURABILITY). */
export type StopReason =
  "lease_lost" | "cancelled" | "fenced" | "lock_lost" | "shutdown" | "log_rolled_back" | "log_not_durable";

export interface ExecuteDeps {
  log: EventLog;
  order: SessionOrder;
  settings: WorkerSettings;
  logger: Logger;
  scrubber: Scrubber;
  /**
   * For raw `cli.line` text: the same secret values as `scrubber` and the built-in patterns, which
   * keep a JSON line valid; none of a caller's hook or extra patterns, which might not.
   */
  lineScrubber: Scrubber;
  /** See every event of every attempt as it is written (spans first, when the worker has a tracer). */
  observers: readonly EventObserver[];
  /** Jobs this worker is running, by job id: for lock loss and shutdown. */
  running: Map<string, RunningTurn>;
  /** The worker's loopback decision hub, for supervised turns (started on first use). */
  decisionHub: (() => Promise<DecisionHub>) | undefined;
  /** Session files of recent snapshots, so a session's next turn here need not rebuild its file from the log. */
  snapshots: SnapshotCache | undefined;
  /** The worker's kept CLI processes (warm sessions). */
  warm: WarmSessions;
  /** The CLI's version, read once per worker; undefined when it could not be read. */
  cliVersion: () => Promise<string | undefined>;
  /** The worker's model gateway and its runs' tokens; undefined when runs hold the credential (passthrough). */
  access: WorkerModelAccess | undefined;
  /** Tenants' shared ledger and limits. */
  tenants: WorkerTenants;
  /** The receiver of the CLIs' own spans and their tokens; undefined with tracing or TURNSTREAM_CLI_TELEMETRY off. */
  cliTelemetry: WorkerCliTelemetry | undefined;
}

export interface RunningTurn {
  readonly session: string;
  readonly turn: string;
  stop(reason: StopReason): void;
}

export interface TurnJobResult {
  outcome: "finished" | "cancelled" | "skipped";
  attempt?: number;
  cliSessionId?: string;
}

/** How a leased job's attempts are stopped from outside: the first reason wins and aborts the run. */
export interface AttemptControl {
  reason: StopReason | undefined;
  ac: AbortController;
  /** The worker's CLI slots as this job sees them: every CLI start takes one. */
  slot: CliSlot | undefined;
  /** The running attempt's warm decision (warm sessions), undefined for a turn in cold mode. */
  warm?: WarmUse | undefined;
  /** The running attempt's model access through the gateway (its token), once opened. */
  access?: RunAccess | undefined;
  /** The running attempt's CLI telemetry token, once opened. */
  cliTelemetry?: CliTelemetryAccess | undefined;
  /** The turn's CLI budget is what its tenant had left (lower than its own): reaching it is the tenant's limit. */
  budgetCappedByTenant?: boolean | undefined;
}

export type AttemptEnd =
  | { kind: "finished"; attempt: number; cliSessionId: string | undefined }
  | { kind: "failed"; attempt: number; errorKind: string; message: string }
  | { kind: "cancelled"; attempt: number }
  | { kind: "retry"; attempt: number; delayMs: number }
  | { kind: "restore"; attempt: number; previous: string | undefined }
  | { kind: "stopped"; attempt: number; reason: StopReason }
  /**
   * The turn parked on `call` (at the attempt's epoch) until `deadline` (ms since the epoch): its job
   * lets go until then.
   */
  | { kind: "parked"; attempt: number; epoch: number; call: ParkedCall }
  | RolledBackEnd;

/**
 * An attempt stopped because the log lost writes it had been acknowledged: the next attempt records
 * it abandoned (log_rolled_back) and runs the turn again from the snapshot it resumed from, if the
 * log still holds that.
 */
export interface RolledBackEnd {
  kind: "rolled_back";
  attempt: number;
  /** The highest seq the attempt had been told was in the log. */
  ackedSeq: number;
  /** The log's real last seq when that was found. */
  lastSeq: number;
  /** The seq of the session snapshot the attempt resumed from (undefined: none). */
  snapshotSeq?: number | undefined;
}

/** An attempt that lost its CLI session and runs again on a fresh one, carrying the transcript. */
export interface Restore {
  previous: string | undefined;
}
