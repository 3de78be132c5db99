// Fleet-wide backpressure at the model gateway. When the upstream answers a Messages request 429
// (rate-limited), 529 (overloaded) or 503 (unavailable: what a load balancer in front of an API says
// when it sheds load, retry-after included), every worker's gateway learns it from Redis: the
// credential cools down, under a key named by its fingerprint (never the secret), until the time the
// answer asked for (retry-after), else an exponential backoff by the cooldown's strikes, capped.
//
// While a credential cools, each gateway HOLDS its new requests instead of answering them. Measured
// with CLI 2.1.332: the CLI retries a 429 or 529 after waiting what retry-after says (× up to 1.25)
// when it says 60 s or less, and gives up at once (an api_error result, no retry) when it says more;
// each retry spends one of its CLAUDE_CODE_MAX_RETRIES, and against this loopback gateway it waits for
// an answer's headers as long as API_TIMEOUT_MS (10 min by default). So an answered 429 costs the run
// a retry, and one with a long retry-after ends the turn, while a held request costs nothing: the
// CLI's retry loop does not run, and the request goes the moment the fleet may send again. Past the
// hold maximum (default 60 s) the gateway answers a 429 whose retry-after is the cooldown's shared
// remaining time, so a CLI never waits unboundedly on the gateway and the turn's own timeouts keep
// meaning what they say.
//
// When a cooldown ends, exactly one request of the whole fleet (the first to ask) goes upstream as
// the probe; the rest keep holding until its answer's headers arrive: another 429 extends the
// cooldown by one more strike, anything else clears it for everyone (strikes start again). A streamed
// answer can still fail after its 200 with an overload or rate-limit error event; when it ends so,
// the credential cools down as if its status had said it. A probe
// that never reached the upstream (its client hung up, another policy refused it) is released, and a
// probe whose worker died is superseded once its claim's lease runs out. A client that hangs up while
// held costs nothing: no upstream request, no probe.
//
// FAIL-OPEN: a cooldown is an optimisation of upstream load, not a security boundary. When Redis
// cannot be read within READ_TIMEOUT_MS, requests go upstream unchecked (the upstream's own limit
// still answers them), with a warning, and for the next second Redis is not asked again, so an outage
// adds no wait to every request. A cooldown that cannot be recorded is logged and dropped.
import { randomUUID } from "node:crypto";
import {
  backoffDelayMs,
  errorReporter,
  silentLogger,
  waitUnlessAborted,
  withTimeout,
  type ErrorReporter,
  type Logger,
} from "../kernel/index.ts";
import { luaScript, scriptCommand, type RedisClient } from "../log/index.ts";
import type { GatewayPolicy, PolicyCall, PolicyDecision, UpstreamAnswer } from "./policy.ts";
import type { ModelCall } from "./calls.ts";

/** Upstream statuses that cool a credential down fleet-wide. */
export const COOLDOWN_STATUSES: ReadonlySet<number> = new Set([429, 503, 529]);

// The API can also fail a streamed answer after its 200: with an error event of one of these types,
// which limit the credential as the status beside each would.
const STREAM_ERROR_STATUS: ReadonlyMap<string, number> = new Map([
  ["rate_limit_error", 429],
  ["overloaded_error", 529],
]);

// Only Messages requests are held and counted: the rate-limited, costly calls. count_tokens and the
// models list have limits of their own and pass as they are.
const COOLED_PATH = /^\/v1\/messages$/;

export interface CooldownSettings {
  /** Longest a request is held before the gateway answers 429 itself (0: answer at once). Default 60 s. */
  maxHoldMs: number;
  /** The first cooldown when the answer names no retry-after; doubled per failed probe. Default 1 s. */
  baseBackoffMs: number;
  /** Longest one cooldown lasts, from retry-after or backoff. Default 60 s: what the CLI still retries. */
  maxBackoffMs: number;
}

export const COOLDOWN_DEFAULTS: Readonly<CooldownSettings> = {
  maxHoldMs: 60_000,
  baseBackoffMs: 1000,
  maxBackoffMs: 60_000,
};

export interface CooldownOptions extends Partial<CooldownSettings> {
  redis: RedisClient;
  /** The worker's key prefix (TURNSTREAM_PREFIX): the cooldowns live under it. */
  prefix: string;
  logger?: Logger | undefined;
  /** How long a probe's claim lasts before another request may probe. Default 30 s. */
  probeLeaseMs?: number;
  /** How often a held request asks again while another request probes. Default 250 ms. */
  pollMs?: number;
  /** How long a "no cooldown" reading is trusted without asking Redis again. Default 100 ms (see bench/cooldown.ts). */
  clearCacheMs?: number;
}

/** Longest a cooldown read may take before the request goes upstream unchecked. */
export const READ_TIMEOUT_MS = 500;
/** After a failed read, how long requests go unchecked before Redis is asked again. */
const FAIL_OPEN_MS = 1000;

/** The Redis keys of the cooldowns under `prefix`: one hash per credential, and their index. */
export function cooldownKeys(prefix: string): { cooldown(fingerprint: string): string; index: string } {
  return { cooldown: (fingerprint) => `${prefix}{cooldown}:c:${fingerprint}`, index: `${prefix}{cooldown}:index` };
}

const CHECK = luaScript("turnstreamCooldownCheck", 2, new URL("./lua/cooldown-check.lua", import.meta.url));
const RECORD = luaScript("turnstreamCooldownRecord", 2, new URL("./lua/cooldown-record.lua", import.meta.url));
const SETTLE = luaScript("turnstreamCooldownSettle", 2, new URL("./lua/cooldown-settle.lua", import.meta.url));

/** What a check found: no cooldown, cooling (ms left), another request probing (its claim's ms left), or probe now. */
type Reading = { kind: "clear" } | { kind: "wait" | "probing"; ms: number } | { kind: "probe" };

const ALLOW: PolicyDecision = { action: "allow" };

/** The backoff waits for strike 1, 2, … up to the first that reaches the cap (the script repeats the last). */
function backoffWaits(settings: CooldownSettings): number[] {
  const waits: number[] = [];
  for (let strike = 1; strike <= 32; strike++) {
    waits.push(backoffDelayMs(strike, { baseMs: settings.baseBackoffMs, maxMs: settings.maxBackoffMs }));
    if (waits.at(-1)! >= settings.maxBackoffMs) break;
  }
  return waits;
}

/** The settings with their defaults filled in; a RangeError names one that is out of range. */
export function cooldownSettings(options: Partial<CooldownSettings>): CooldownSettings {
  const settings: CooldownSettings = {
    maxHoldMs: options.maxHoldMs ?? COOLDOWN_DEFAULTS.maxHoldMs,
    baseBackoffMs: options.baseBackoffMs ?? COOLDOWN_DEFAULTS.baseBackoffMs,
    maxBackoffMs: options.maxBackoffMs ?? COOLDOWN_DEFAULTS.maxBackoffMs,
  };
  for (const [name, value] of Object.entries(settings))
    if (!Number.isSafeInteger(value) || value < (name === "maxHoldMs" ? 0 : 1))
      throw new RangeError(
        `cooldown.${name} must be a whole number of ms, ${name === "maxHoldMs" ? 0 : 1} or more, got ${value}`,
      );
  if (settings.baseBackoffMs > settings.maxBackoffMs)
    throw new RangeError(
      `cooldown.baseBackoffMs (${settings.baseBackoffMs} ms) is longer than cooldown.maxBackoffMs (${settings.maxBackoffMs} ms)`,
    );
  return settings;
}

/** The 429 a held request gets past the hold maximum: the fleet's remaining wait as its retry-after. */
function heldTooLong(reading: Reading): PolicyDecision {
  const retryAfterS = reading.kind === "wait" ? Math.max(1, Math.ceil(reading.ms / 1000)) : 1;
  return {
    action: "refuse",
    status: 429,
    type: "rate_limit_error",
    message: `turnstream gateway: the model API is limiting this credential and the fleet is holding its requests; retry after ${retryAfterS} s`,
    retryAfterS,
  };
}

// Returned to a request whose client hung up while held; the gateway sees the hang-up and sends nothing.
const HUNG_UP: PolicyDecision = {
  action: "refuse",
  status: 499,
  type: "api_error",
  message: "turnstream gateway: the client hung up while its request was held",
};

/** A GatewayPolicy that shares 429/529/503 cooldowns of each credential across the fleet through Redis. */
export class FleetCooldown implements GatewayPolicy {
  readonly #settings: CooldownSettings;
  readonly #keys: ReturnType<typeof cooldownKeys>;
  readonly #scripts;
  readonly #waits: string[];
  readonly #probeLeaseMs: number;
  readonly #pollMs: number;
  readonly #clearCacheMs: number;
  readonly #logger: Logger;
  readonly #report: ErrorReporter;
  /** Requests let through as their credential's probe, and the token that holds it. */
  readonly #probes = new WeakMap<PolicyCall, string>();
  /** Per fingerprint: until when (performance.now()) a "no cooldown" reading is trusted. */
  readonly #clearUntil = new Map<string, number>();
  #failOpenUntil = 0;
  /** Records and settles not yet answered by Redis. */
  readonly #writes = new Set<Promise<void>>();

  constructor(options: CooldownOptions) {
    this.#settings = cooldownSettings(options);
    this.#keys = cooldownKeys(options.prefix);
    this.#scripts = {
      check: scriptCommand<[string, number?]>(options.redis, CHECK),
      record: scriptCommand<[number, number, number]>(options.redis, RECORD),
      settle: scriptCommand<number>(options.redis, SETTLE),
    };
    this.#waits = backoffWaits(this.#settings).map(String);
    this.#probeLeaseMs = options.probeLeaseMs ?? 30_000;
    this.#pollMs = options.pollMs ?? 250;
    this.#clearCacheMs = options.clearCacheMs ?? 100;
    this.#logger = options.logger ?? silentLogger;
    this.#report = errorReporter(this.#logger);
  }

  get settings(): Readonly<CooldownSettings> {
    return this.#settings;
  }

  async beforeRequest(call: PolicyCall): Promise<PolicyDecision> {
    if (!COOLED_PATH.test(call.path)) return ALLOW;
    const fingerprint = call.credentialFingerprint;
    if ((this.#clearUntil.get(fingerprint) ?? 0) > performance.now()) return ALLOW;
    return this.#hold(call, fingerprint);
  }

  onUpstreamAnswer(call: PolicyCall, answer: UpstreamAnswer): void {
    if (!COOLED_PATH.test(call.path)) return;
    const token = this.#probes.get(call);
    this.#probes.delete(call);
    const fingerprint = call.credentialFingerprint;
    if (COOLDOWN_STATUSES.has(answer.status)) {
      this.#clearUntil.delete(fingerprint);
      this.#track(this.#record(fingerprint, answer, token));
    } else if (token !== undefined) {
      this.#track(this.#settle(fingerprint, token, "clear"));
    }
  }

  /**
   * A streamed answer that ended in an overload or rate-limit error event limits the credential as its
   * status would have. A probe that ended without an upstream answer (hung up, refused by another
   * policy, unreachable) is released.
   */
  afterResponse(call: PolicyCall, outcome: ModelCall): void {
    const status = outcome.streamError === undefined ? undefined : STREAM_ERROR_STATUS.get(outcome.streamError);
    if (status !== undefined && COOLED_PATH.test(call.path)) {
      this.#clearUntil.delete(call.credentialFingerprint);
      this.#track(this.#record(call.credentialFingerprint, { status, retryAfterMs: undefined }, undefined));
    }
    const token = this.#probes.get(call);
    if (token === undefined) return;
    this.#probes.delete(call);
    this.#track(this.#settle(call.credentialFingerprint, token, "release"));
  }

  /** Resolves once every record and settle made so far has been answered by Redis (or failed). */
  async flush(): Promise<void> {
    await Promise.all([...this.#writes]);
  }

  #track(write: Promise<void>): void {
    this.#writes.add(write);
    void write.finally(() => this.#writes.delete(write));
  }

  /** Holds the request while its credential cools: until it may go (clear, or as probe), the cap, or a hang-up. */
  async #hold(call: PolicyCall, fingerprint: string): Promise<PolicyDecision> {
    const started = performance.now();
    const token = randomUUID();
    for (;;) {
      const reading = await this.#check(fingerprint, token);
      if (reading.kind === "clear") return ALLOW;
      if (reading.kind === "probe") {
        // If its client hung up meanwhile, the gateway ends the call unsent and afterResponse releases it.
        this.#probes.set(call, token);
        return ALLOW;
      }
      const left = this.#settings.maxHoldMs - (performance.now() - started);
      if (left <= 0) return heldTooLong(reading);
      const nap = Math.min(reading.kind === "wait" ? reading.ms : Math.min(reading.ms, this.#pollMs), left);
      if (!(await waitUnlessAborted(Math.max(1, nap), call.signal))) return HUNG_UP;
    }
  }

  async #check(fingerprint: string, token: string): Promise<Reading> {
    if (performance.now() < this.#failOpenUntil) return { kind: "clear" };
    const asked = this.#scripts.check(
      [this.#keys.cooldown(fingerprint), this.#keys.index],
      [fingerprint, token, this.#probeLeaseMs],
    );
    let reply: [string, number?];
    try {
      reply = await withTimeout(asked, READ_TIMEOUT_MS, `Redis did not answer within ${READ_TIMEOUT_MS} ms`);
    } catch (err) {
      this.#failOpenUntil = performance.now() + FAIL_OPEN_MS;
      this.#report("gateway cooldown not read: requests go upstream unchecked (fail-open)", err);
      // A check that answers after its timeout may have claimed the probe for a request that has gone
      // on unchecked: the claim goes back, so the fleet's next probe does not wait for its lease.
      void asked.then(
        ([late]) => late === "probe" && this.#track(this.#settle(fingerprint, token, "release")),
        () => undefined,
      );
      return { kind: "clear" };
    }
    const [kind, ms] = reply;
    if (kind === "clear") this.#clearUntil.set(fingerprint, performance.now() + this.#clearCacheMs);
    else this.#clearUntil.delete(fingerprint);
    if (kind === "wait" || kind === "probing") return { kind, ms: Number(ms) };
    return { kind: kind === "probe" ? "probe" : "clear" };
  }

  async #record(fingerprint: string, answer: UpstreamAnswer, token: string | undefined): Promise<void> {
    // What the answer asked for, within the longest cooldown: a longer one costs a probe per maxBackoffMs.
    const asked =
      answer.retryAfterMs === undefined ? "" : Math.round(Math.min(answer.retryAfterMs, this.#settings.maxBackoffMs));
    try {
      const [ms, strikes, began] = await this.#scripts.record(
        [this.#keys.cooldown(fingerprint), this.#keys.index],
        [fingerprint, answer.status, asked, token ?? "", this.#probeLeaseMs, ...this.#waits],
      );
      // Once per cooldown and per failed probe: the 429s of requests already in flight say nothing new.
      if (began === 1 || token !== undefined)
        this.#logger.info(
          { credential: fingerprint, status: answer.status, cooldownMs: ms, strikes, probe: token !== undefined },
          "model API limited the credential: the fleet holds its requests",
        );
    } catch (err) {
      this.#report("gateway cooldown not recorded", err, { credential: fingerprint, status: answer.status });
    }
  }

  async #settle(fingerprint: string, token: string, outcome: "clear" | "release"): Promise<void> {
    try {
      const settled = await this.#scripts.settle(
        [this.#keys.cooldown(fingerprint), this.#keys.index],
        [fingerprint, token, outcome],
      );
      if (settled === 1 && outcome === "clear")
        this.#logger.info({ credential: fingerprint }, "model API answered the probe: the credential's cooldown ended");
    } catch (err) {
      this.#report(`gateway cooldown probe not settled (${outcome})`, err, { credential: fingerprint });
    }
  }
}

/** A credential cooling now, as `turnstream status`, the metrics and the dashboard show it. */
export interface CooldownEntry {
  /** The credential's fingerprint (a digest, never the credential). */
  fingerprint: string;
  /** When the cooldown ends (Redis's clock); past it, one probe decides. */
  until: string;
  /** Until then, from now (0 once it ended and a probe decides). */
  remainingMs: number;
  /** The upstream status that set or last extended it: 429, 529 or 503. */
  status: number;
  /** 1, plus one per probe answered 429 again. */
  strikes: number;
  /** Probes let through since it began. */
  probes: number;
  /** Whether a probe is in flight now. */
  probing: boolean;
  /** When it began. */
  since: string;
}

const numberOf = (text: string | undefined): number => {
  const value = Number(text);
  return Number.isFinite(value) ? value : 0;
};

/**
 * The cooldowns active now under `prefix`, soonest ending first. Only read commands (a reader's ACL
 * role allows no TIME): Redis's own clock comes from the index, whose score for a cooldown is the
 * instant its hash expires, written by the same script as the hash's PEXPIRE, so score − PTTL is
 * Redis's now.
 */
/** What credential.ts's fingerprint() gives: the first 16 hex digits of the secret's SHA-256. */
const FINGERPRINT = /^[0-9a-f]{16}$/;

export async function listCooldowns(redis: RedisClient, prefix: string): Promise<CooldownEntry[]> {
  const keys = cooldownKeys(prefix);
  const indexed = await redis.zrange(keys.index, 0, -1, "WITHSCORES");
  const entries: CooldownEntry[] = [];
  for (let at = 0; at + 1 < indexed.length; at += 2) {
    const fingerprint = indexed[at]!;
    // Anyone who can write Redis can add to the index: only a fingerprint's shape is listed.
    if (!FINGERPRINT.test(fingerprint)) continue;
    const [hash, pttl] = await Promise.all([
      redis.hgetall(keys.cooldown(fingerprint)),
      redis.pttl(keys.cooldown(fingerprint)),
    ]);
    if (hash["until"] === undefined || pttl <= 0) continue;
    const now = numberOf(indexed[at + 1]) - pttl;
    const until = numberOf(hash["until"]);
    entries.push({
      fingerprint,
      until: new Date(until).toISOString(),
      remainingMs: Math.max(0, until - now),
      status: numberOf(hash["status"]),
      strikes: numberOf(hash["strikes"]),
      probes: numberOf(hash["probes"]),
      probing: hash["probe"] !== undefined && numberOf(hash["probeUntil"]) > now,
      since: new Date(numberOf(hash["since"])).toISOString(),
    });
  }
  return entries.sort((a, b) => a.until.localeCompare(b.until));
}
