// Which kinds exist and what each set of them means. Any kind matching KIND_PATTERN can be stored and
// read (a newer writer's kind reaches older readers, who carry it unread); these are the ones
// turnstream writes.
import type { EventKind } from "./schemas.ts";

/** Dotted lowercase names: `turn.queued`, `cli.line`, `decision.made`, and any future kind. */
export const KIND_PATTERN = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/;

/** Kinds that end a turn: when one is a turn's latest turn-state event, the turn is over. */
export const TERMINAL_KINDS: ReadonlySet<EventKind> = new Set(["turn.finished", "turn.failed", "turn.cancelled"]);

/** Kinds after which an attempt writes nothing more (its spans end there). */
export const ATTEMPT_END_KINDS: ReadonlySet<EventKind> = new Set([
  ...TERMINAL_KINDS,
  "attempt.abandoned",
  "turn.parked",
]);

/** Kinds that belong to one turn's run and move its state (the rest are session facts and decisions). */
export const TURN_KINDS: ReadonlySet<EventKind> = new Set([
  "turn.queued",
  "attempt.started",
  "cli.line",
  "cli.stderr",
  "cli.exit",
  "attempt.abandoned",
  "model.call",
  "turn.parked",
  ...TERMINAL_KINDS,
]);

/** Kinds renamed since logs were written, older name → today's: a reader takes the older as today's. */
export const RENAMED_KINDS: Readonly<Record<string, EventKind>> = { "session.replayed": "session.replaced" };

/** The kind a stored event's kind is read as: today's name of a renamed kind, else the kind itself. */
export function currentKind(kind: string): string {
  return Object.hasOwn(RENAMED_KINDS, kind) ? RENAMED_KINDS[kind]! : kind;
}

/** Whether an event of this kind ends its turn (finished, failed or cancelled). */
export function isTerminalKind(kind: string): boolean {
  return (TERMINAL_KINDS as ReadonlySet<string>).has(kind);
}
