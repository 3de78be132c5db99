// One attempt of a leased turn as its steps see it: made once when the attempt begins (attempt.ts),
// then handed to each step in turn, which reads what it needs from it and returns what it produced:
// the preparation its run (PreparedAttempt), the CLI step how the run went (CliRun), the outcome step
// how the attempt ended. The shapes live here, apart from the steps, so no step imports another.
import type { EnvOverlay, ToolSandbox, TurnOutcome } from "../runner/index.ts";
import type { ParkedCall, SupervisedRun } from "../decisions/index.ts";
import type { CliExitData } from "../events/index.ts";
import type { ParsedLine } from "../protocol/index.ts";
import type { TurnJob } from "../queue/index.ts";
import type { Scrubber } from "../telemetry/index.ts";
import type { AttemptEvents } from "./attempt-events.ts";
import type { ResumePlan } from "./resume.ts";
import type { Snapshot } from "./snapshots.ts";
import type { AttemptControl, ExecuteDeps, Restore, RolledBackEnd } from "./types.ts";

export interface Attempt {
  /**
   * What the worker gives every attempt: its log, queue order, settings, logger, scrubbers, warm processes, gateway.
   */
  readonly worker: ExecuteDeps;
  readonly job: TurnJob;
  /** How the attempt is stopped from outside, its CLI slot, and the warm use and model access its steps open. */
  readonly control: AttemptControl;
  /** The attempt's number and epoch, and every event it writes. */
  readonly events: AttemptEvents;
  /** Set when this attempt runs the turn again on a fresh CLI session, the last one having been lost. */
  readonly restore: Restore | undefined;
  /** The job's previous attempt, stopped on a log that lost writes it had been acknowledged (this one records it). */
  readonly rolledBack: RolledBackEnd | undefined;
  /** The session's latest snapshot, read as the attempt begins (none for a restore). */
  readonly snapshot: Promise<Snapshot | undefined>;
  /** Set when the turn parked: this attempt resumes the deferred call (an empty stdin, not the prompt). */
  readonly parked: ParkedTurn | undefined;
}

/** A turn that parked: the call it waits on, and what its parked runs so far add up to. */
export interface ParkedTurn {
  call: ParkedCall;
  /** How many times the turn parked: parked runs are not retries. */
  parks: number;
  /** What the turn's parked runs cost, together. */
  costUsd: number;
  /** Seq of its `turn.parked`. */
  seq: number;
}

/** What the run step needs from the preparation. */
export interface PreparedRun {
  /** The job's env overlay, resolved. */
  env: Record<string, string>;
  /** The run's model access through the gateway (laid over `env`); undefined in passthrough. */
  modelEnv?: EnvOverlay | undefined;
  /** The CLI's own telemetry, on (its token and TRACEPARENT) or off (undefined: every such name removed). */
  telemetryEnv?: EnvOverlay | undefined;
  /** Scrubs raw `cli.line` text and the session file; undefined when the worker keeps them raw. */
  lines: Scrubber | undefined;
  /** Undefined when the run resumes a parked call: the CLI continues the turn from an empty stdin. */
  prompt: string | undefined;
  /** The CLI session to resume. */
  resume: string | undefined;
  /** The snapshot this run restores (its file is restored when `resume` is its session). */
  snapshot: Snapshot | undefined;
  /** Where the resumed CLI session's running total stands as this run starts: its results count from it (resume.ts). */
  costBaseUsd: number | undefined;
  /** Set when the session had a CLI session this run does not continue, and why. */
  fresh: ResumePlan["fresh"];
  /** Turns whose transcript a restore carries. */
  restoredTurns: number;
  supervised: SupervisedRun | undefined;
  /** The tool sandbox of a turn whose workspace is not trusted (undefined: unsandboxed). */
  toolSandbox: ToolSandbox | undefined;
}

/** An attempt its preparation passed: the run it prepared. */
export interface PreparedAttempt extends Attempt {
  readonly run: PreparedRun;
}

/** How the CLI run ended, once its outcome is known and its output written. */
export interface CliRun {
  /** Set when the CLI reported a result; otherwise `failure` says why not. */
  outcome: TurnOutcome | undefined;
  failure: unknown;
  exit: CliExitData;
  /** The CLI's retry and rate-limit lines, for the next attempt's delay. */
  hints: ParsedLine[];
  /** Why the run was ended for printing too much, if it was. */
  outputLimitExceeded: string | undefined;
}
