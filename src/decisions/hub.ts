// The decision hub: a loopback HTTP server inside the worker that the hook forwarder asks. Each call
// is recorded (`decision.requested`, fenced with the attempt's epoch), then decided by a trust rule at
// once or by the first operator `decision.made` that appears in the session log, or denied at the
// timeout. Anything that goes wrong answers deny.
//
// Anyone who can write to Redis can append a `decision.made` or store a rule, so the hub acts only on
// what a trusted operator key signed (signing.ts): a decision for exactly the request it recorded, a
// rule whose signature checks. Anything else is logged and ignored; the request keeps waiting. A hub
// without operator keys refuses to start: it could never accept a decision.
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AckedSeqs, type EventLog, type Logger, type RedisClient } from "../log/index.ts";
import { BodyTooLargeError, forTerminal, listen, readBody, silentLogger } from "../kernel/index.ts";
import { HubClosedError, OperatorKeysMissingError } from "./errors.ts";
import { decisionMadeData, type Decision, type DecisionMade, type DecisionRequested } from "../events/index.ts";
import {
  hookInputSchema,
  inputDigestOf,
  riskClassOf,
  scrubReport,
  summarizeInput,
  unsafeShownField,
  type HookInput,
  type TextScrubber,
} from "./tool-calls.ts";
import { parseOperatorKeys, type OperatorKeyring } from "./operator-keys.ts";
import { dropPending, hubKey, pendingEntryOf, putPending, type PendingEntry } from "./pending.ts";
import { evaluateRules, RuleStore, subjectOf, type TrustRule } from "./rules.ts";
import { requestDigest, verifyDecision, verifyRule } from "./signing.ts";
import { readParkedRequest, type DeferredCall, type ParkedCall } from "./parked.ts";

export const DEFAULT_DECISION_TIMEOUT_MS = 300_000;
export const DEFAULT_ANSWER_WINDOW_MS = 5000;
const MAX_BODY = 16 * 1024 * 1024;
const NONCE = /^[A-Za-z0-9_-]{16,128}$/;

export interface DecisionHubOptions {
  /** Where requests and decisions are recorded (`decision.requested`, `decision.made`). */
  log: EventLog;
  /** Holds the trust rules, the fleet's pending index and the hub's heartbeat. */
  redis: RedisClient;
  /** Key prefix for the rules, pending index and heartbeat (default: the log's prefix). */
  prefix?: string | undefined;
  /** Where the hub logs (pino-compatible). */
  logger?: Logger | undefined;
  /** Scrubs the input summary written to the log and the pending index. */
  scrubber?: TextScrubber | undefined;
  /** How long a request waits for an operator before it is denied (default 300 s). */
  timeoutMs?: number | undefined;
  /**
   * How long a call of a turn that may park waits for an operator before the hub answers `defer` and
   * the turn parks (default 5 s). Calls that cannot park wait `timeoutMs` as before.
   */
  answerWindowMs?: number | undefined;
  /** Heartbeat period; the hub counts as gone (its requests abandoned) after 3 missed beats. Default 5 s. */
  heartbeatMs?: number | undefined;
  /**
   * The operators' public keys (`ed25519:…` lines, as `turnstream operator-key new` prints them, or a
   * parsed keyring). Required: only decisions and rules signed by one of them count.
   */
  operatorKeys?: readonly string[] | OperatorKeyring | undefined;
}

export interface RunContext {
  session: string;
  turn: string;
  attempt: number;
  epoch: number;
  /** Relative file globs in rules are matched against paths relative to this directory. */
  cwd?: string | undefined;
  /**
   * The turn may park: a call no rule decides and no operator answers within the answer window is
   * deferred (the CLI ends its run) and denied unless decided within `deadlineMs`.
   */
  park?: { deadlineMs: number } | undefined;
  /** The run resumes a parked turn: the first call the CLI asks about is answered from this record. */
  resume?: ParkedCall | undefined;
}

export interface RunRegistration {
  readonly token: string;
  /** The call this run's hook deferred, once it did: the run's CLI ends and the turn parks on it. */
  deferred(): DeferredCall | undefined;
  unregister(): void;
}

export interface DecisionHub {
  readonly url: string;
  readonly port: number;
  readonly hubId: string;
  readonly timeoutMs: number;
  /** A bearer token for one supervised run (prepareSupervisedRun does this for you). */
  registerRun(run: RunContext): RunRegistration;
  /**
   * Whether a parked call is answered yet (a verified operator decision, a trust rule, or its
   * deadline): a worker resumes the turn only then. Records nothing.
   */
  parkedAnswered(run: RunContext, parked: ParkedCall): Promise<boolean>;
  /** Requests waiting for an operator right now. */
  waiting(): number;
  /** Denies whatever is still waiting (recorded as decided by the hub), stops the server. */
  close(): Promise<void>;
}

interface Verdict {
  decision: Decision | "defer";
  reason: string;
  requestId?: string;
}

/** A registered run and what happened in it so far. */
interface RegisteredRun extends RunContext {
  /** Set once the resumed call was asked about: the run's later calls are ordinary requests. */
  resumeAsked: boolean;
  deferred: DeferredCall | undefined;
}

const digest = (token: string): string => createHash("sha256").update(token).digest("hex");

function keyringOf(keys: DecisionHubOptions["operatorKeys"]): OperatorKeyring {
  const ring = keys === undefined ? undefined : "verify" in keys ? keys : parseOperatorKeys(keys);
  if (ring === undefined || ring.size === 0) throw new OperatorKeysMissingError();
  return ring;
}

/** Why a call cannot park, or undefined when it can. */
function unparkable(input: HookInput, redacted: boolean): string | undefined {
  if (input.tool_use_id === undefined) return "the CLI gave no tool-use id to resume it by";
  // A deferral inside a subagent is not one: the CLI drops the call and the subagent ends (FACTS.md).
  if (typeof (input as Record<string, unknown>)["agent_id"] === "string") return "it is a subagent's call";
  // The session file is scrubbed like the log: a redacted input would not come back as it was asked.
  if (redacted) return "its input holds redacted text, which the resumed session would not hold";
  return undefined;
}

// The CLI resumes one deferred call per run: a second call of the same message cannot park beside it.
const ONE_PARKED =
  "another call of this message already waits for an operator, and a turn parks on one call at a time; make this call again once that one is decided";

const unsafeReason = (unsafe: string): string =>
  `${unsafe}: an operator could be shown something other than what would run; ask without control characters`;

/** The call as operators are shown it: scrubbed summary and subject, and what scrubbing took out. */
function shownCall(
  input: Pick<HookInput, "tool_name" | "tool_input">,
  scrubber: TextScrubber | undefined,
): { input: string; subject: string | undefined; redacted: string[] | undefined } {
  const summary = scrubReport(summarizeInput(input.tool_name, input.tool_input), scrubber);
  const raw = subjectOf(input.tool_name, input.tool_input);
  const subject = raw === undefined || raw.length > 4000 ? undefined : scrubReport(raw, scrubber);
  const redacted = [...new Set([...summary.redacted, ...(subject?.redacted ?? [])])].sort();
  return { input: summary.text, subject: subject?.text, redacted: redacted.length > 0 ? redacted : undefined };
}

/** Whether a recorded request shows exactly what `call` shows (tool, risk class, summary, subject, redactions). */
function showsAs(
  requested: DecisionRequested,
  call: Pick<HookInput, "tool_name" | "tool_input">,
  scrubber: TextScrubber | undefined,
): boolean {
  const shown = shownCall(call, scrubber);
  return (
    requested.tool === call.tool_name &&
    requested.riskClass === riskClassOf(call.tool_name) &&
    requested.input === shown.input &&
    requested.subject === shown.subject &&
    JSON.stringify(requested.redacted) === JSON.stringify(shown.redacted)
  );
}

/** The hub's settings, with defaults applied once. */
interface HubSettings {
  log: EventLog;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  scrubber: TextScrubber | undefined;
  timeoutMs: number;
  answerWindowMs: number;
  hubId: string;
  keyring: OperatorKeyring;
}

/**
 * Decides each hook call of a registered run: records the request, applies the signed trust rules,
 * else waits for a verified operator decision in the session log until the timeout or the hub closes.
 */
class Decider {
  readonly #s: HubSettings;
  readonly #rules: RuleStore;
  /** Aborted when the hub closes: every wait ends and is denied. */
  readonly #closing: AbortSignal;
  // Warned once per rule and signature: the rules are read on every request.
  readonly #warnedRules = new Set<string>();
  /** What the hub last recorded per session, claimed by its next append (a rolled-back log refuses it). */
  readonly #acked = new AckedSeqs();
  waiting = 0;

  constructor(settings: HubSettings, closing: AbortSignal) {
    this.#s = settings;
    this.#rules = new RuleStore(settings.redis, settings.prefix);
    this.#closing = closing;
  }

  async decide(run: RegisteredRun, input: HookInput, nonce: string): Promise<Verdict> {
    // The CLI of a resumed parked turn asks about the deferred call first, and only once.
    if (run.resume !== undefined && !run.resumeAsked) {
      run.resumeAsked = true;
      return this.#answerResumed(run, run.resume, input, nonce);
    }
    return this.#decideNew(run, input, nonce);
  }

  /** A call asked about for the first time: recorded, then a rule, an operator, or parking decides. */
  async #decideNew(run: RegisteredRun, input: HookInput, nonce: string): Promise<Verdict> {
    const now = Date.now();
    const unsafe = unsafeShownField(input.tool_name, input.tool_input);
    const requested = this.#requestOf(run, input, nonce, now, unsafe !== undefined);
    const recorded = await this.#record(run, requested);
    if (typeof recorded !== "number") return recorded;
    if (unsafe !== undefined) return this.#denyAtOnce(run, requested, unsafeReason(unsafe));
    const byRule = await this.#byRule(run, input, requested.requestId);
    return byRule ?? (await this.#byOperator(run, requested, recorded, now, this.#description(input)));
  }

  /** Appends the request (fenced with the attempt's epoch): its seq, or the deny when it cannot be recorded. */
  async #record(run: RunContext, requested: DecisionRequested): Promise<number | Verdict> {
    const request = [{ turn: run.turn, attempt: run.attempt, kind: "decision.requested", data: requested }];
    const appended = await this.#s.log.append(run.session, run.epoch, request, {
      ackedSeq: this.#acked.get(run.session),
    });
    // A log that lost what the hub had recorded in it (rolled_back) cannot take requests either.
    if (appended.outcome === "rolled_back") this.#acked.forget(run.session);
    else this.#acked.settle(run.session, appended);
    if (appended.outcome === "appended") return appended.lastSeq;
    const reason = `turnstream: denied because this attempt can no longer record requests (${appended.outcome})`;
    return { decision: "deny", reason, requestId: requested.requestId };
  }

  /**
   * The re-asked call of a resumed parked turn. It must be the deferred call exactly (tool-use id and
   * input digest, as recorded and signed): the CLI reads it back from a session file that was out of
   * the worker's hands, so anything else is recorded as its own request and denied. The request's
   * first verified operator decision answers; else a trust rule; else, past the deadline, a deny;
   * else it parks again.
   */
  async #answerResumed(run: RegisteredRun, parked: ParkedCall, input: HookInput, nonce: string): Promise<Verdict> {
    if (input.tool_use_id !== parked.toolUseId || inputDigestOf(input.tool_input) !== parked.inputDigest) {
      const requested = this.#requestOf(run, input, nonce, Date.now(), true);
      const recorded = await this.#record(run, requested);
      if (typeof recorded !== "number") return recorded;
      this.#s.logger.warn(
        { session: run.session, requestId: parked.requestId, tool: input.tool_name },
        "the resumed call is not the parked one; denied",
      );
      const why = `the resumed call is not the one request ${parked.requestId} asked about (its tool-use id or input differs)`;
      return this.#denyAtOnce(run, requested, why);
    }
    const answer = await this.parkedAnswer(run, parked, input);
    // Its allow was used by a run that then ended before the turn did: whether to run it again is
    // a new question for an operator.
    if (answer === "spent") return this.#decideNew(run, input, nonce);
    if (answer === undefined) {
      run.deferred = { call: parked, entry: undefined };
      return { decision: "defer", reason: "turnstream: still waiting for an operator", requestId: parked.requestId };
    }
    if (answer.decision === "allow" && !(await this.#markApplied(run, parked.requestId))) {
      const reason = "turnstream: denied because this attempt can no longer record that it used the allow";
      return { decision: "deny", reason, requestId: parked.requestId };
    }
    return answer;
  }

  /** Records (fenced) that a parked call's allow is being used, so no later run uses it again. */
  async #markApplied(run: RunContext, requestId: string): Promise<boolean> {
    const applied = [{ turn: run.turn, attempt: run.attempt, kind: "decision.applied", data: { requestId } }];
    const res = await this.#s.log.append(run.session, run.epoch, applied, { ackedSeq: this.#acked.get(run.session) });
    if (res.outcome === "rolled_back") this.#acked.forget(run.session);
    else this.#acked.settle(run.session, res);
    return res.outcome === "appended";
  }

  /**
   * How a parked request stands now: its first verified operator decision, else a trust rule that
   * decides the call (the re-asked `call`, else the call as recorded), else at the deadline a deny;
   * undefined while it still waits. A rule's and the deadline's verdicts are recorded unless `call`
   * is undefined (a worker asking whether to resume at all). The recorded request must name the parked
   * call's tool-use id and digest, or it is denied.
   */
  async parkedAnswer(
    run: RunContext,
    parked: ParkedCall,
    call?: Pick<HookInput, "tool_name" | "tool_input">,
  ): Promise<Verdict | "spent" | undefined> {
    const record = call !== undefined;
    const deny = (why: string): Verdict => {
      const reason = `turnstream: denied because ${why}`;
      return { decision: "deny", reason, requestId: parked.requestId };
    };
    // Only a decision signed by the deadline counts: after it, the request is the hub's to deny.
    const counts = (requested: DecisionRequested, made: DecisionMade): boolean =>
      this.#refusal(run, requested, requestDigest(run.session, requested), made) === undefined &&
      Date.parse(made.decidedAt) <= Date.parse(requested.expiresAt);
    const found = await readParkedRequest(this.#s.log, run.session, run.turn, parked, counts);
    if (found === undefined) return deny(`request ${parked.requestId} is not recorded as the parked call`);
    // What operators were shown must be what the re-asked call shows: a request planted in the log with
    // the real call's digest and a look-alike summary would otherwise pass a signature for the look-alike.
    if (call !== undefined && !showsAs(found.requested, call, this.#s.scrubber))
      return deny(`the resumed call is not the call request ${parked.requestId} showed operators`);
    if (found.applied) return "spent";
    if (found.decided !== undefined) return this.#operatorVerdict(found.decided);
    const byRule = await this.#byRule(run, call ?? found.call, parked.requestId, record);
    if (byRule !== undefined) return byRule;
    if (Date.parse(parked.deadline) > Date.now()) return undefined;
    if (!record) return { decision: "deny", reason: "", requestId: parked.requestId };
    return this.#denyUnanswered(run, found.requested, "deadline");
  }

  /**
   * Whether a call of this run may park: the run may, the call has an id, it is the main loop's and
   * nothing in it was redacted. A call that cannot park waits in the running CLI, as without parking,
   * and the worker's log says why.
   */
  #parkable(run: RunContext, input: HookInput, redacted: boolean): boolean {
    if (run.park === undefined) return false;
    const why = unparkable(input, redacted);
    if (why === undefined) return true;
    this.#s.logger.info(
      { session: run.session, tool: input.tool_name, why, waitMs: this.#s.timeoutMs },
      "this call cannot park; it waits in the running CLI",
    );
    return false;
  }

  /** The model's description of a call (scrubbed, clipped), shown apart from the command it describes. */
  #description(input: HookInput): string | undefined {
    const text = input.tool_input["description"];
    if (typeof text !== "string" || text.length === 0) return undefined;
    const clipped = text.length > 500 ? `${text.slice(0, 500)}… (${text.length} chars)` : text;
    return this.#s.scrubber === undefined ? clipped : this.#s.scrubber.scrub(clipped);
  }

  /** A call the hub refuses before any rule or operator sees it: denied at once, recorded as the hub's. */
  async #denyAtOnce(run: RunContext, requested: DecisionRequested, reason: string): Promise<Verdict> {
    const { requestId } = requested;
    this.#s.logger.warn({ session: run.session, requestId, tool: requested.tool, reason }, "refused a tool call");
    await this.#recordMade(run, {
      requestId,
      decision: "deny",
      by: "hub",
      source: "hub",
      reason,
      decidedAt: new Date().toISOString(),
    });
    return { decision: "deny", reason: `turnstream: denied because ${reason}`, requestId: requested.requestId };
  }

  /**
   * The `decision.requested` record of a call, expiring timeoutMs after `now` (a parkable call: at its
   * deadline). A call refused at once is recorded escaped and expired: it is never open for a decision.
   */
  #requestOf(run: RunContext, input: HookInput, nonce: string, now: number, refused: boolean): DecisionRequested {
    const { hubId } = this.#s;
    const raw = shownCall(input, this.#s.scrubber);
    const escape = (text: string | undefined): string | undefined =>
      text === undefined || !refused ? text : forTerminal(text, { multiline: true });
    const shown = { ...raw, input: escape(raw.input)!, subject: escape(raw.subject) };
    const parkable = !refused && this.#parkable(run, input, raw.redacted !== undefined);
    const timeoutMs = parkable ? run.park!.deadlineMs : this.#s.timeoutMs;
    return {
      requestId: `dr-${randomBytes(12).toString("base64url")}`,
      nonce,
      tool: refused ? forTerminal(input.tool_name) : input.tool_name,
      toolUseId: input.tool_use_id,
      riskClass: riskClassOf(input.tool_name),
      input: shown.input,
      subject: shown.subject,
      redacted: shown.redacted,
      cliSessionId: input.session_id,
      hubId,
      timeoutMs,
      expiresAt: new Date(refused ? now : now + timeoutMs).toISOString(),
      // Only a call that may park needs it; a redacted call's digest would let a reader guess the secret.
      inputDigest: parkable ? inputDigestOf(input.tool_input) : undefined,
      parkable: parkable ? true : undefined,
    };
  }

  /** The first signed trust rule that applies decides at once (recorded as the rule's decision). */
  async #byRule(
    run: RunContext,
    input: Pick<HookInput, "tool_name" | "tool_input">,
    requestId: string,
    record = true,
  ): Promise<Verdict | undefined> {
    // Matched against the raw input, never the scrubbed copy operators see. An empty cwd counts as none.
    const call = { tool: input.tool_name, input: input.tool_input, cwd: run.cwd || undefined };
    const verdict = evaluateRules(this.#trusted(await this.#rules.list()), call);
    if (verdict === undefined) return undefined;
    if (!record) return { decision: verdict.effect, reason: "", requestId };
    const reason = `turnstream trust rule ${verdict.rule.pattern} (${verdict.effect}, added by ${verdict.rule.by})`;
    await this.#recordMade(run, {
      requestId,
      decision: verdict.effect,
      by: `rule:${verdict.rule.id}`,
      source: "rule",
      reason,
      decidedAt: new Date().toISOString(),
      ruleId: verdict.rule.id,
    });
    return { decision: verdict.effect, reason, requestId };
  }

  #trusted(all: readonly TrustRule[]): TrustRule[] {
    return all.filter((rule) => {
      const verified = verifyRule(this.#s.keyring, rule);
      const seen = `${rule.id}/${rule.signature}`;
      if (!verified.ok && !this.#warnedRules.has(seen)) {
        this.#warnedRules.add(seen);
        this.#s.logger.warn(
          { hubId: this.#s.hubId, ruleId: rule.id, pattern: rule.pattern.slice(0, 200), why: verified.why },
          "ignored a trust rule that no trusted operator key signed",
        );
      }
      return verified.ok;
    });
  }

  /**
   * Listed in the fleet's pending index while it waits for an operator; denied at the timeout or when the hub closes.
   */
  async #byOperator(
    run: RegisteredRun,
    requested: DecisionRequested,
    seq: number,
    requestedAt: number,
    description: string | undefined,
  ): Promise<Verdict> {
    const { redis, prefix, logger } = this.#s;
    const { requestId } = requested;
    const { session, turn, attempt, epoch } = run;
    const place = { session, turn, attempt, epoch, seq, requestedAt: new Date(requestedAt).toISOString() };
    const entry: PendingEntry = { ...pendingEntryOf(requested, place), description };
    await putPending(redis, prefix, entry);
    this.waiting++;
    try {
      const parkable = requested.parkable === true;
      const waitMs = parkable ? this.#s.answerWindowMs : this.#s.timeoutMs;
      const got = await this.#waitForOperator(run, seq, requested, requestedAt + waitMs);
      if (typeof got !== "string") return this.#operatorVerdict(got);
      if (got === "timeout" && parkable && run.deferred !== undefined)
        return this.#denyAtOnce(run, requested, ONE_PARKED);
      if (got === "timeout" && parkable) return this.#defer(run, requested, seq, entry);
      return await this.#denyUnanswered(run, requested, got);
    } finally {
      this.waiting--;
      await dropPending(redis, prefix, run.session, requestId).catch((err: unknown) =>
        logger.warn({ err: (err as Error).message, requestId }, "could not clean the pending index"),
      );
    }
  }

  /** No answer within the window: the hook answers defer, the CLI ends its run and the worker parks the turn. */
  #defer(run: RegisteredRun, requested: DecisionRequested, seq: number, entry: PendingEntry): Verdict {
    const { requestId } = requested;
    const call: ParkedCall = {
      requestId,
      requestSeq: seq,
      tool: requested.tool,
      toolUseId: requested.toolUseId!,
      inputDigest: requested.inputDigest!,
      deadline: requested.expiresAt,
    };
    run.deferred = { call, entry };
    return { decision: "defer", reason: "turnstream: waiting for an operator; the turn parks", requestId };
  }

  /** The first verified operator decision for the request, or why none came. */
  async #waitForOperator(
    run: RunContext,
    afterSeq: number,
    requested: DecisionRequested,
    deadline: number,
  ): Promise<DecisionMade | "timeout" | "closed"> {
    // Also when the hub closed while the request was being recorded: that abort has already fired.
    if (this.#closing.aborted) return "closed";
    const stop = new AbortController();
    const onClose = (): void => stop.abort();
    this.#closing.addEventListener("abort", onClose, { once: true });
    let timedOut = false;
    const requestDigestHex = requestDigest(run.session, requested);
    const timer = setTimeout(
      () => {
        timedOut = true;
        stop.abort();
      },
      Math.max(0, deadline - Date.now()),
    );
    try {
      for await (const ev of this.#s.log.tail(run.session, {
        fromSeq: afterSeq + 1,
        signal: stop.signal,
        blockMs: 1000,
      })) {
        if (ev.kind !== "decision.made") continue;
        const made = decisionMadeData.safeParse(ev.data);
        if (!made.success || made.data.requestId !== requested.requestId) continue;
        const why = this.#refusal(run, requested, requestDigestHex, made.data);
        if (why === undefined) return made.data;
        this.#s.logger.warn(
          {
            hubId: this.#s.hubId,
            session: run.session,
            requestId: requested.requestId,
            seq: ev.seq,
            by: made.data.by.slice(0, 100),
            why,
          },
          "ignored a decision that is not a trusted operator's; still waiting",
        );
      }
    } finally {
      clearTimeout(timer);
      this.#closing.removeEventListener("abort", onClose);
    }
    return timedOut ? "timeout" : "closed";
  }

  /** Why an operator's decision.made cannot be acted on, or undefined when it can. */
  #refusal(
    run: RunContext,
    requested: DecisionRequested,
    requestDigestHex: string,
    made: DecisionMade,
  ): string | undefined {
    const verified = verifyDecision(this.#s.keyring, run.session, made, requestDigestHex);
    if (!verified.ok) return verified.why;
    if (made.decision === "allow" && requested.redacted !== undefined && made.allowRedacted !== true) {
      return "it allows a request whose shown input was redacted without saying allowRedacted";
    }
    return undefined;
  }

  #operatorVerdict(made: DecisionMade): Verdict {
    const keyName = this.#s.keyring.nameOf(made.keyId!);
    const text = made.reason.length > 0 ? `: ${made.reason}` : "";
    const signed = ` (signed with operator key ${made.keyId}${keyName !== undefined ? ` of ${keyName}` : ""})`;
    const verb = made.decision === "allow" ? "allowed" : "denied";
    return {
      decision: made.decision,
      reason: `turnstream: ${verb} by ${made.by}${text}${signed}`,
      requestId: made.requestId,
    };
  }

  /** No operator decided: deny, recorded as the hub's (a timeout is flagged for escalation). */
  async #denyUnanswered(
    run: RunContext,
    requested: DecisionRequested,
    why: "timeout" | "deadline" | "closed",
  ): Promise<Verdict> {
    const { requestId } = requested;
    const timedOut = why !== "closed";
    const reason =
      why === "timeout"
        ? `no operator decided within ${Math.round(this.#s.timeoutMs / 1000)} s`
        : why === "deadline"
          ? `no operator decided before the request's deadline (${requested.expiresAt})`
          : "the worker's decision hub shut down";
    if (timedOut)
      this.#s.logger.warn(
        { session: run.session, requestId, tool: requested.tool },
        "supervised decision timed out; denied and escalated",
      );
    await this.#recordMade(run, {
      requestId,
      decision: "deny",
      by: "hub",
      source: timedOut ? "timeout" : "hub",
      reason,
      decidedAt: new Date().toISOString(),
      timeoutPolicy: timedOut ? "escalate" : undefined,
    }).catch((err: unknown) =>
      this.#s.logger.warn({ err: (err as Error).message, requestId }, "could not record the hub's deny"),
    );
    return { decision: "deny", reason: `turnstream: denied because ${reason}`, requestId };
  }

  async #recordMade(run: RunContext, made: DecisionMade): Promise<void> {
    const res = await this.#s.log.appendUnfenced(
      run.session,
      [{ turn: run.turn, attempt: run.attempt, kind: "decision.made", data: made }],
      {
        ackedSeq: this.#acked.get(run.session),
      },
    );
    this.#acked.settle(run.session, res);
  }
}

/**
 * Supervised runs by bearer token. Tokens are looked up by their hash: the map never holds a secret and lookup time
 * says nothing about it.
 */
class RunTokens {
  readonly #runs = new Map<string, RegisteredRun>();

  register(run: RunContext): RunRegistration {
    const token = randomBytes(32).toString("base64url");
    const key = digest(token);
    const registered: RegisteredRun = { ...run, resumeAsked: false, deferred: undefined };
    this.#runs.set(key, registered);
    return { token, deferred: () => registered.deferred, unregister: () => void this.#runs.delete(key) };
  }

  /** The run an `Authorization: Bearer …` header names, if any. */
  runOf(authorization: string | undefined): RegisteredRun | undefined {
    const token =
      typeof authorization === "string" && authorization.startsWith("Bearer ") ? authorization.slice(7) : "";
    return token.length > 0 ? this.#runs.get(digest(token)) : undefined;
  }

  clear(): void {
    this.#runs.clear();
  }
}

const reply = (res: ServerResponse, status: number, body: Record<string, unknown>): void => {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    connection: "close",
  });
  res.end(text);
};

/** The forwarder's PreToolUse input, or why it cannot be used. */
async function readHookInput(req: IncomingMessage): Promise<HookInput | string> {
  try {
    const parsed = hookInputSchema.safeParse(JSON.parse(await readBody(req, MAX_BODY)));
    return parsed.success ? parsed.data : "the hook input was not a PreToolUse call";
  } catch (err) {
    if (err instanceof BodyTooLargeError) req.destroy();
    return "the hook input could not be read";
  }
}

interface HookEndpoint {
  settings: HubSettings;
  tokens: RunTokens;
  decider: Decider;
  isClosed(): boolean;
}

/**
 * One forwarder request: checks the endpoint, token, nonce and input, then answers the verdict. Anything wrong answers
 * deny.
 */
async function answerHook(hub: HookEndpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { logger, hubId } = hub.settings;
  const nonceHeader = req.headers["x-turnstream-nonce"];
  const nonce = typeof nonceHeader === "string" && NONCE.test(nonceHeader) ? nonceHeader : "";
  const deny = (status: number, why: string): void =>
    reply(res, status, { decision: "deny", reason: `turnstream: denied because ${why}`, nonce });
  if (req.method !== "POST" || req.url !== "/v1/hook") return deny(404, "the forwarder asked the wrong endpoint");
  const run = hub.tokens.runOf(req.headers.authorization);
  if (run === undefined) {
    logger.warn({ hubId }, "decision request with a missing or unknown token; denied");
    return deny(401, "the request's token is missing or unknown");
  }
  if (nonce === "") return deny(400, "the request had no valid nonce");
  if (hub.isClosed()) return deny(503, "the worker's decision hub is shutting down");
  const input = await readHookInput(req);
  if (typeof input === "string") return deny(400, input);
  let verdict: Verdict;
  try {
    verdict = await hub.decider.decide(run, input, nonce);
  } catch (err) {
    logger.error(
      { err: (err as Error).message, session: run.session, tool: input.tool_name },
      "supervised decision failed; denied",
    );
    verdict = { decision: "deny", reason: "turnstream: denied because the decision could not be made or recorded" };
  }
  reply(res, 200, { ...verdict, nonce });
}

/** The hub's liveness key, renewed every period; the pending index counts the hub gone after 3 missed beats. */
async function startHeartbeat(settings: HubSettings, heartbeatMs: number): Promise<NodeJS.Timeout> {
  const beat = (): Promise<unknown> =>
    settings.redis.set(hubKey(settings.prefix, settings.hubId), String(process.pid), "PX", heartbeatMs * 3);
  await beat();
  const timer = setInterval(() => {
    void beat().catch((err: unknown) => {
      settings.logger.warn({ err: (err as Error).message, hubId: settings.hubId }, "decision hub heartbeat failed");
    });
  }, heartbeatMs);
  timer.unref();
  return timer;
}

/** Listens on a free loopback port; requests still being answered are tracked so close() can wait for them. */
async function listenLoopback(
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  inflight: Set<Promise<unknown>>,
): Promise<Server> {
  const server = createServer((req, res) => {
    const answered = handle(req, res).catch(() => {
      if (!res.headersSent) reply(res, 500, { decision: "deny", reason: "turnstream: denied because the hub failed" });
    });
    inflight.add(answered);
    void answered.finally(() => inflight.delete(answered));
  });
  await listen(server, 0, "127.0.0.1");
  return server;
}

/**
 * Starts the worker's loopback decision hub: hook forwarders post each risky tool call to it; a trust rule, an operator
 * or the timeout decides.
 */
export async function startDecisionHub(options: DecisionHubOptions): Promise<DecisionHub> {
  const settings: HubSettings = {
    log: options.log,
    redis: options.redis,
    keyring: keyringOf(options.operatorKeys),
    prefix: options.prefix ?? options.log.prefix,
    logger: options.logger ?? silentLogger,
    scrubber: options.scrubber,
    timeoutMs: options.timeoutMs ?? DEFAULT_DECISION_TIMEOUT_MS,
    answerWindowMs: options.answerWindowMs ?? DEFAULT_ANSWER_WINDOW_MS,
    hubId: `hub-${randomBytes(9)
      .toString("base64url")
      .replace(/[^A-Za-z0-9]/g, "x")}`,
  };
  const { redis, prefix, hubId, timeoutMs, logger } = settings;
  const closing = new AbortController();
  const tokens = new RunTokens();
  const decider = new Decider(settings, closing.signal);
  const inflight = new Set<Promise<unknown>>();
  let closed = false;
  const heartbeat = await startHeartbeat(settings, options.heartbeatMs ?? 5000);
  const endpoint: HookEndpoint = { settings, tokens, decider, isClosed: () => closed };
  const server = await listenLoopback((req, res) => answerHook(endpoint, req, res), inflight);
  const port = (server.address() as AddressInfo).port;
  logger.info({ hubId, port }, "decision hub listening");

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hubId,
    timeoutMs,
    registerRun(run: RunContext): RunRegistration {
      if (closed) throw new HubClosedError();
      return tokens.register(run);
    },
    parkedAnswered: async (run, parked) => (await decider.parkedAnswer(run, parked)) !== undefined,
    waiting: () => decider.waiting,
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearInterval(heartbeat);
      closing.abort();
      await Promise.allSettled([...inflight]);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      tokens.clear();
      await redis.del(hubKey(prefix, hubId)).catch(() => {});
    },
  };
}
