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
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { EventLog, Logger, RedisClient } from "../log/index.ts";
import { HubClosedError, OperatorKeysMissingError } from "./errors.ts";
import { decisionMadeData, type Decision, type DecisionMade, type DecisionRequested } from "../events/index.ts";
import { hookInputSchema, riskClassOf, scrubReport, summarizeInput, type HookInput, type TextScrubber } from "./tool-calls.ts";
import { parseOperatorKeys, type OperatorKeyring } from "./operator-keys.ts";
import { dropPending, hubKey, putPending } from "./pending.ts";
import { evaluateRules, RuleStore, subjectOf, type TrustRule } from "./rules.ts";
import { requestDigest, verifyDecision, verifyRule } from "./signing.ts";

export const DEFAULT_DECISION_TIMEOUT_MS = 300_000;
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
}

export interface RunRegistration {
  readonly token: string;
  unregister(): void;
}

export interface DecisionHub {
  readonly url: string;
  readonly port: number;
  readonly hubId: string;
  readonly timeoutMs: number;
  /** A bearer token for one supervised run (prepareSupervisedRun does this for you). */
  registerRun(run: RunContext): RunRegistration;
  /** Requests waiting for an operator right now. */
  waiting(): number;
  /** Denies whatever is still waiting (recorded as decided by the hub), stops the server. */
  close(): Promise<void>;
}

interface Verdict {
  decision: Decision;
  reason: string;
  requestId?: string;
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const digest = (token: string): string => createHash("sha256").update(token).digest("hex");

function keyringOf(keys: DecisionHubOptions["operatorKeys"]): OperatorKeyring {
  const ring = keys === undefined ? undefined : "verify" in keys ? keys : parseOperatorKeys(keys);
  if (ring === undefined || ring.size === 0) throw new OperatorKeysMissingError();
  return ring;
}

/** The call as operators are shown it: scrubbed summary and subject, and what scrubbing took out. */
function shownCall(input: HookInput, scrubber: TextScrubber | undefined): { input: string; subject?: string; redacted?: string[] } {
  const summary = scrubReport(summarizeInput(input.tool_name, input.tool_input), scrubber);
  const raw = subjectOf(input.tool_name, input.tool_input);
  const subject = raw === undefined || raw.length > 4000 ? undefined : scrubReport(raw, scrubber);
  const redacted = [...new Set([...summary.redacted, ...(subject?.redacted ?? [])])].sort();
  return {
    input: summary.text,
    ...(subject !== undefined ? { subject: subject.text } : {}),
    ...(redacted.length > 0 ? { redacted } : {}),
  };
}

/** Starts the worker's loopback decision hub: hook forwarders post each risky tool call to it; a trust rule, an operator or the timeout decides. */
export async function startDecisionHub(options: DecisionHubOptions): Promise<DecisionHub> {
  const { log, redis } = options;
  const keyring = keyringOf(options.operatorKeys);
  const prefix = options.prefix ?? log.prefix;
  const logger = options.logger ?? silent;
  const timeoutMs = options.timeoutMs ?? DEFAULT_DECISION_TIMEOUT_MS;
  const heartbeatMs = options.heartbeatMs ?? 5000;
  const hubId = `hub-${randomBytes(9).toString("base64url").replace(/[^A-Za-z0-9]/g, "x")}`;
  const rules = new RuleStore(redis, prefix);
  // Tokens are looked up by their hash: the map never holds a secret and lookup time says nothing about it.
  const runs = new Map<string, RunContext>();
  const closing = new AbortController();
  const inflight = new Set<Promise<unknown>>();
  let waitingCount = 0;
  let closed = false;

  const beat = (): Promise<unknown> =>
    redis.set(hubKey(prefix, hubId), String(process.pid), "PX", heartbeatMs * 3).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message, hubId }, "decision hub heartbeat failed");
    });
  await redis.set(hubKey(prefix, hubId), String(process.pid), "PX", heartbeatMs * 3);
  const heartbeat = setInterval(() => void beat(), heartbeatMs);
  heartbeat.unref();

  const recordMade = async (run: RunContext, made: DecisionMade): Promise<void> => {
    await log.appendUnfenced(run.session, [{ turn: run.turn, attempt: run.attempt, kind: "decision.made", data: made }]);
  };

  // Warned once per rule and signature: the rules are read on every request.
  const warnedRules = new Set<string>();
  const trustedRules = (all: readonly TrustRule[]): TrustRule[] =>
    all.filter((rule) => {
      const v = verifyRule(keyring, rule);
      if (!v.ok && !warnedRules.has(`${rule.id}/${rule.signature}`)) {
        warnedRules.add(`${rule.id}/${rule.signature}`);
        logger.warn({ hubId, ruleId: rule.id, pattern: rule.pattern.slice(0, 200), why: v.why }, "ignored a trust rule that no trusted operator key signed");
      }
      return v.ok;
    });

  /** Why an operator's decision.made cannot be acted on, or undefined when it can. */
  const refusal = (run: RunContext, requested: DecisionRequested, digest: string, made: DecisionMade): string | undefined => {
    const v = verifyDecision(keyring, run.session, made, digest);
    if (!v.ok) return v.why;
    if (made.decision === "allow" && requested.redacted !== undefined && made.allowRedacted !== true) {
      return "it allows a request whose shown input was redacted without saying allowRedacted";
    }
    return undefined;
  };

  async function waitForOperator(run: RunContext, afterSeq: number, requested: DecisionRequested, deadline: number): Promise<DecisionMade | "timeout" | "closed"> {
    const stop = new AbortController();
    const onClose = (): void => stop.abort();
    closing.signal.addEventListener("abort", onClose, { once: true });
    let timedOut = false;
    const digest = requestDigest(run.session, requested);
    const timer = setTimeout(() => {
      timedOut = true;
      stop.abort();
    }, Math.max(0, deadline - Date.now()));
    try {
      for await (const ev of log.tail(run.session, { fromSeq: afterSeq + 1, signal: stop.signal, blockMs: 1000 })) {
        if (ev.kind !== "decision.made") continue;
        const made = decisionMadeData.safeParse(ev.data);
        if (!made.success || made.data.requestId !== requested.requestId) continue;
        const why = refusal(run, requested, digest, made.data);
        if (why === undefined) return made.data;
        logger.warn({ hubId, session: run.session, requestId: requested.requestId, seq: ev.seq, by: made.data.by.slice(0, 100), why }, "ignored a decision that is not a trusted operator's; still waiting");
      }
    } finally {
      clearTimeout(timer);
      closing.signal.removeEventListener("abort", onClose);
    }
    return timedOut ? "timeout" : "closed";
  }

  async function decide(run: RunContext, input: HookInput, nonce: string): Promise<Verdict> {
    const requestId = `dr-${randomBytes(12).toString("base64url")}`;
    const now = Date.now();
    const requested: DecisionRequested = {
      requestId,
      nonce,
      tool: input.tool_name,
      ...(input.tool_use_id !== undefined ? { toolUseId: input.tool_use_id } : {}),
      riskClass: riskClassOf(input.tool_name),
      ...shownCall(input, options.scrubber),
      ...(input.session_id !== undefined ? { cliSessionId: input.session_id } : {}),
      hubId,
      timeoutMs,
      expiresAt: new Date(now + timeoutMs).toISOString(),
    };
    const appended = await log.append(run.session, run.epoch, [
      { turn: run.turn, attempt: run.attempt, kind: "decision.requested", data: requested },
    ]);
    if (appended.outcome !== "appended") {
      return { decision: "deny", reason: `turnstream: denied because this attempt can no longer record requests (${appended.outcome})`, requestId };
    }
    const seq = appended.lastSeq;
    // Matched against the raw input, never the scrubbed copy operators see.
    const verdict = evaluateRules(trustedRules(await rules.list()), { tool: input.tool_name, input: input.tool_input, ...(run.cwd ? { cwd: run.cwd } : {}) });
    if (verdict !== undefined) {
      const reason = `turnstream trust rule ${verdict.rule.pattern} (${verdict.effect}, added by ${verdict.rule.by})`;
      await recordMade(run, {
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
    await putPending(redis, prefix, {
      session: run.session,
      requestId,
      turn: run.turn,
      attempt: run.attempt,
      epoch: run.epoch,
      seq,
      tool: requested.tool,
      riskClass: requested.riskClass,
      input: requested.input,
      ...(requested.redacted !== undefined ? { redacted: requested.redacted } : {}),
      hubId,
      requestedAt: new Date(now).toISOString(),
      expiresAt: requested.expiresAt,
    });
    waitingCount++;
    try {
      const got = await waitForOperator(run, seq, requested, now + timeoutMs);
      if (typeof got !== "string") {
        const keyName = keyring.nameOf(got.keyId!);
        const text = got.reason.length > 0 ? `: ${got.reason}` : "";
        const signed = ` (signed with operator key ${got.keyId}${keyName !== undefined ? ` of ${keyName}` : ""})`;
        return { decision: got.decision, reason: `turnstream: ${got.decision === "allow" ? "allowed" : "denied"} by ${got.by}${text}${signed}`, requestId };
      }
      const reason =
        got === "timeout"
          ? `no operator decided within ${Math.round(timeoutMs / 1000)} s`
          : "the worker's decision hub shut down";
      if (got === "timeout") logger.warn({ session: run.session, requestId, tool: requested.tool }, "supervised decision timed out; denied and escalated");
      await recordMade(run, {
        requestId,
        decision: "deny",
        by: "hub",
        source: got === "timeout" ? "timeout" : "hub",
        reason,
        decidedAt: new Date().toISOString(),
        ...(got === "timeout" ? { timeoutPolicy: "escalate" as const } : {}),
      }).catch((err: unknown) => logger.warn({ err: (err as Error).message, requestId }, "could not record the hub's deny"));
      return { decision: "deny", reason: `turnstream: denied because ${reason}`, requestId };
    } finally {
      waitingCount--;
      await dropPending(redis, prefix, run.session, requestId).catch((err: unknown) =>
        logger.warn({ err: (err as Error).message, requestId }, "could not clean the pending index"),
      );
    }
  }

  const reply = (res: ServerResponse, status: number, body: Record<string, unknown>): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), connection: "close" });
    res.end(text);
  };

  const readBody = (req: IncomingMessage): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      let size = 0;
      req.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) {
          reject(new Error("hook input too large"));
          req.destroy();
        } else parts.push(c);
      });
      req.on("end", () => resolve(Buffer.concat(parts)));
      req.on("error", reject);
    });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const nonceHeader = req.headers["x-turnstream-nonce"];
    const nonce = typeof nonceHeader === "string" && NONCE.test(nonceHeader) ? nonceHeader : "";
    const deny = (status: number, why: string): void => reply(res, status, { decision: "deny", reason: `turnstream: denied because ${why}`, nonce });
    if (req.method !== "POST" || req.url !== "/v1/hook") return deny(404, "the forwarder asked the wrong endpoint");
    const auth = req.headers.authorization;
    const token = typeof auth === "string" && auth.startsWith("Bearer ") ? auth.slice(7) : "";
    const run = token.length > 0 ? runs.get(digest(token)) : undefined;
    if (run === undefined) {
      logger.warn({ hubId }, "decision request with a missing or unknown token; denied");
      return deny(401, "the request's token is missing or unknown");
    }
    if (nonce === "") return deny(400, "the request had no valid nonce");
    if (closed) return deny(503, "the worker's decision hub is shutting down");
    let input: HookInput;
    try {
      const parsed = hookInputSchema.safeParse(JSON.parse((await readBody(req)).toString("utf8")));
      if (!parsed.success) return deny(400, "the hook input was not a PreToolUse call");
      input = parsed.data;
    } catch {
      return deny(400, "the hook input could not be read");
    }
    let verdict: Verdict;
    try {
      verdict = await decide(run, input, nonce);
    } catch (err) {
      logger.error({ err: (err as Error).message, session: run.session, tool: input.tool_name }, "supervised decision failed; denied");
      verdict = { decision: "deny", reason: "turnstream: denied because the decision could not be made or recorded" };
    }
    reply(res, 200, { ...verdict, nonce });
  }

  const server = createServer((req, res) => {
    const p = handle(req, res).catch(() => {
      if (!res.headersSent) reply(res, 500, { decision: "deny", reason: "turnstream: denied because the hub failed" });
    });
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  logger.info({ hubId, port }, "decision hub listening");

  return {
    url,
    port,
    hubId,
    timeoutMs,
    registerRun(run: RunContext): RunRegistration {
      if (closed) throw new HubClosedError();
      const token = randomBytes(32).toString("base64url");
      const key = digest(token);
      runs.set(key, { ...run });
      return { token, unregister: () => void runs.delete(key) };
    },
    waiting: () => waitingCount,
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearInterval(heartbeat);
      closing.abort();
      await Promise.allSettled([...inflight]);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      runs.clear();
      await redis.del(hubKey(prefix, hubId)).catch(() => {});
    },
  };
}
