// What a thrown error says about itself, read the same way wherever an attempt catches one: its
// kind, name and message, and whether it is worth running the turn again.
import { isFailureKind, isRetryableKind, type FailureKind } from "../events/index.ts";

export interface ErrorFields {
  kind: FailureKind;
  retryable: boolean;
  name: string;
  message: string;
}

/**
 * A thrown error's kind (`cli_error` when it names none of the failure table's), name and message; it
 * is retryable only when it says so and its kind is one worth retrying.
 */
export function errFields(err: unknown): ErrorFields {
  const fields = err as { kind?: unknown; retryable?: unknown; name?: unknown; message?: unknown };
  const kind = typeof fields?.kind === "string" && isFailureKind(fields.kind) ? fields.kind : "cli_error";
  return {
    kind,
    retryable:
      typeof fields?.retryable === "boolean" ? fields.retryable && isRetryableKind(kind) : isRetryableKind(kind),
    name: typeof fields?.name === "string" ? fields.name : "Error",
    message: typeof fields?.message === "string" ? fields.message : String(err),
  };
}
