// Typed failures of one CLI run. Raw stderr is kept for diagnosis but never enumerable and never in
// `message`: it can echo prompts, paths or secrets, and errors end up in logs and job records.
import { isRetryableKind, type KnownErrorKind } from "../events/index.ts";
import { TurnstreamError } from "../kernel/index.ts";
import type { LimitErrorKind } from "./limits.ts";

/** Failure kinds the CLI runner adds to the protocol's result classification. */
export type RunnerErrorKind =
  "timeout" | "inactivity" | "aborted" | "killed" | "cli_not_found" | "bad_options" | LimitErrorKind;
// Every one has its row in the failure table (a compile error otherwise).
true satisfies RunnerErrorKind extends KnownErrorKind ? true : never;

export interface ClaudeCodeCliErrorFields {
  kind: string;
  exitCode?: number | null;
  signal?: NodeJS.Signals | null;
  subtype?: string | undefined;
  errors?: readonly string[] | undefined;
  terminalReason?: string | undefined;
  apiErrorStatus?: number | undefined;
  retryable?: boolean;
  stderr?: string;
  cause?: unknown;
}

/** `code` is the kind; `retryable` defaults to the kind's (src/events/failures.ts). */
export class ClaudeCodeCliError extends TurnstreamError {
  readonly kind: string;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly subtype: string | undefined;
  readonly errors: readonly string[];
  readonly terminalReason: string | undefined;
  readonly apiErrorStatus: number | undefined;
  declare readonly stderr: string;

  constructor(message: string, fields: ClaudeCodeCliErrorFields) {
    super(message, {
      code: fields.kind,
      retryable: fields.retryable ?? isRetryableKind(fields.kind),
      cause: fields.cause,
    });
    this.kind = fields.kind;
    this.exitCode = fields.exitCode ?? null;
    this.signal = fields.signal ?? null;
    this.subtype = fields.subtype;
    this.errors = Object.freeze([...(fields.errors ?? [])]);
    this.terminalReason = fields.terminalReason;
    this.apiErrorStatus = fields.apiErrorStatus;
    Object.defineProperty(this, "stderr", { value: fields.stderr ?? "", enumerable: false, writable: false });
  }
}

/** `--resume` named a session the CLI could not find (under this config dir and cwd). */
export class LostSessionError extends ClaudeCodeCliError {
  readonly sessionId: string;
  readonly threadId: string | undefined;

  constructor(sessionId: string, threadId: string | undefined, fields: Omit<ClaudeCodeCliErrorFields, "kind">) {
    super(
      `the CLI has no conversation for session ${sessionId}` +
        (threadId === undefined ? "" : ` (thread ${threadId})`) +
        `; restore its session file under this cwd's project folder or start a fresh session`,
      { ...fields, kind: "lost_session", retryable: false },
    );
    this.sessionId = sessionId;
    this.threadId = threadId;
  }
}

export class CliNotFoundError extends ClaudeCodeCliError {
  readonly tried: readonly string[];

  constructor(tried: readonly string[], cause?: unknown) {
    super(
      `claude CLI not found (tried ${tried.join(", ")}); set the claudeBin option or CLAUDE_BIN to the claude binary, ` +
        `or install @anthropic-ai/claude-code`,
      { kind: "cli_not_found", retryable: false, cause },
    );
    this.tried = Object.freeze([...tried]);
  }
}

export function badOptions(field: string, problem: string): ClaudeCodeCliError {
  return new ClaudeCodeCliError(`bad runTurn option \`${field}\`: ${problem}`, {
    kind: "bad_options",
    retryable: false,
  });
}

/** The run hit one of its limits (limits.ts): its tree was ended. Never retryable: the same turn hits it again. */
export class LimitExceededError extends ClaudeCodeCliError {
  constructor(kind: LimitErrorKind, detail: string, fields: Omit<ClaudeCodeCliErrorFields, "kind" | "retryable"> = {}) {
    super(`the run hit its ${LIMIT_NOUN[kind]} limit: ${detail}; its process tree was ended and its scratch removed`, {
      ...fields,
      kind,
      retryable: false,
    });
  }
}

const LIMIT_NOUN: Record<LimitErrorKind, string> = {
  limit_pids: "process",
  limit_memory: "memory",
  limit_disk: "scratch disk",
  limit_duration: "wall time",
};
