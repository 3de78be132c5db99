// Parked turns on the command line, shared by `pending`, `run --wait` and `batch`: the exact command
// that decides a request, how long until its deadline, and a watch over a followed turn's events that
// says when it parks and on what (the call as its `decision.requested` showed it to operators).
import { dataOf } from "../../events/index.ts";
import { forTerminal, TurnstreamError } from "../../kernel/index.ts";
import type { Envelope } from "../../log/index.ts";
import { formatAge } from "./_duration.ts";

// Ids as the log and the hub make them: a word a shell passes through unchanged. Anything else (a
// Redis writer's choice) is quoted, so the printed command is safe to paste.
const SHELL_WORD = /^[A-Za-z0-9_.:@%+=,/-]+$/;

const shellWord = (text: string): string => (SHELL_WORD.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`);

/** `turnstream decide <session> <requestId> allow|deny`, ready to paste (escaped for the terminal). */
export function decideCommand(session: string, requestId: string): string {
  return forTerminal(`turnstream decide ${shellWord(session)} ${shellWord(requestId)} allow|deny`);
}

/** `7h56m left`, or `past its deadline`: when a waiting request is denied unless decided. */
export function timeLeft(deadline: string, now = Date.now()): string {
  const ms = Date.parse(deadline) - now;
  if (!Number.isFinite(ms)) return "no deadline known";
  return ms > 0 ? `${formatAge(ms)} left` : "past its deadline";
}

/** A turn that parked, as a command following it reports it. */
export interface ParkedView {
  session: string;
  turn: string;
  requestId: string;
  tool: string;
  /** The call as operators are shown it: the exact command or subject, else the shortened input. */
  shown: string | undefined;
  /** When the request is denied unless decided (ISO). */
  deadline: string;
  /** How many times the turn has parked, this time included. */
  parks: number;
  decideCommand: string;
}

/** Why a wait stopped: the turn parked and --exit-on-park asked to stop following it (exit 5). */
export class TurnParkedStop extends TurnstreamError {
  readonly parked: ParkedView;
  constructor(parked: ParkedView) {
    super(`turn ${parked.turn} parked on request ${parked.requestId}`, { code: "turn_parked" });
    this.parked = parked;
  }
}

/**
 * Watches one turn's events (every kind: follow it with an `onEvent`) and calls `onPark` each time it
 * parks, with the request it waits on. The requests are learned from the turn's own
 * `decision.requested` events, which come before the `turn.parked` that names them.
 */
export class ParkWatch {
  readonly #session: string;
  readonly #turn: string;
  readonly #onPark: (parked: ParkedView) => void;
  readonly #requests = new Map<string, { tool: string; shown: string }>();

  constructor(session: string, turn: string, onPark: (parked: ParkedView) => void) {
    this.#session = session;
    this.#turn = turn;
    this.#onPark = onPark;
  }

  readonly onEvent = (event: Envelope): void => {
    if (event.turn !== this.#turn) return;
    if (event.kind === "decision.requested") {
      const requested = dataOf("decision.requested", event.data);
      if (requested !== undefined)
        this.#requests.set(requested.requestId, {
          tool: requested.tool,
          shown: requested.subject ?? requested.input,
        });
    } else if (event.kind === "turn.parked") {
      const parked = dataOf("turn.parked", event.data);
      if (parked === undefined) return;
      this.#onPark({
        session: this.#session,
        turn: this.#turn,
        requestId: parked.requestId,
        tool: parked.tool,
        shown: this.#requests.get(parked.requestId)?.shown,
        deadline: parked.deadline,
        parks: parked.parks,
        decideCommand: decideCommand(this.#session, parked.requestId),
      });
    }
  };
}

/**
 * What a command says on stderr when the turn it follows parks: the call, its deadline, the exact
 * decide command, and whether it goes on waiting. Every field is escaped for the terminal.
 */
export function parkedNotice(who: string, parked: ParkedView, stillWaiting: boolean, now = Date.now()): string {
  const shown =
    parked.shown === undefined
      ? ""
      : `  call:     ${forTerminal(parked.shown, { multiline: true }).replace(/\n/g, "\n            ")}\n`;
  const next = stillWaiting
    ? "  still waiting, holding nothing meanwhile (--exit-on-park stops the wait instead)\n"
    : "  not waiting for it (--exit-on-park): it resumes on a worker once decided\n";
  return (
    `${who}: turn ${forTerminal(parked.turn)} parked: its ${forTerminal(parked.tool)} call waits for an operator's decision (request ${forTerminal(parked.requestId)})\n` +
    shown +
    `  deadline: ${forTerminal(parked.deadline)} (${timeLeft(parked.deadline, now)}; denied unless decided before)\n` +
    `  decide:   ${parked.decideCommand}\n` +
    next
  );
}
