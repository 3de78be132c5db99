// A run's model access. With the gateway on (the default), a run holds no credential of the worker's:
// its CLI gets the gateway's URL and a token of its own, and the gateway puts the worker's credential
// on each request. A cold run's token lives for its attempt. A warm session's token lives as long as
// the session's kept CLI process (whose env cannot change between turns): each turn binds it to
// that turn's attempt, and between turns it is bound to none, so its calls are refused.
// With TURNSTREAM_GATEWAY=passthrough a run holds the worker's credential as before. The gateway asks
// the tenants' budgets, the caller's policy and then the fleet cooldown (src/gateway/cooldown.ts) of
// each request.
import { join } from "node:path";
import { CREDENTIALS_FILE, NoAuthError, operatorConfigDir, type EnvOverlay } from "../runner/index.ts";
import type { ModelCallData } from "../events/index.ts";
import {
  composePolicies,
  credentialFrom,
  FleetCooldown,
  startGateway,
  unbrokerableProvider,
  upstreamBaseUrl,
  UNBROKERABLE_PROVIDERS,
  type CallSink,
  type GatewayPolicy,
  type ModelCall,
  type ModelGateway,
  type RunGrant,
  type Upstream,
} from "../gateway/index.ts";
import type { Logger } from "../kernel/index.ts";
import type { RedisClient } from "../log/index.ts";
import type { TurnJob } from "../queue/index.ts";
import { WorkerConfigError } from "./config.ts";
import type { GatewayMode, WorkerSettings } from "./options.ts";
import type { WarmUse } from "./warm.ts";
import { WarmTokens } from "./warm-tokens.ts";

/** Variables that carry a model credential or say where to send it: never in a brokered run's env. */
export const MODEL_CREDENTIAL_VARS = [
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "CLAUDE_CODE_OAUTH_TOKEN",
  "CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
  "ANTHROPIC_BASE_URL",
] as const;

/**
 * The env overlay that gives a run its model access through the gateway: every credential variable
 * removed (an `undefined` in the overlay removes an inherited one), the gateway's URL and the run's
 * token set. This is the whole of the run-env change brokering makes.
 */
export function gatewayRunEnv(gateway: Pick<ModelGateway, "runEnv">, grant: RunGrant): EnvOverlay {
  const overlay: EnvOverlay = {};
  for (const name of MODEL_CREDENTIAL_VARS) overlay[name] = undefined;
  return { ...overlay, ...gateway.runEnv(grant) };
}

/** One attempt's model access: the env overlay and the token behind it. */
export interface RunAccess {
  env: EnvOverlay;
  grant: RunGrant;
  /** The warm session whose token this is (it outlives the attempt while its process is kept). */
  session: string | undefined;
  /** A warm session's token from an earlier turn (its kept process may answer this one). */
  reused: boolean;
}

/** The model.call event data of a call (the credential's fingerprint stays out of the log). */
export function modelCallData(call: ModelCall): ModelCallData {
  const { credential: _credential, ...data } = call;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(data)) if (value !== undefined) out[key] = value;
  return out as ModelCallData;
}

/** Refuses a worker whose provider the gateway cannot broker, unless the operator chose passthrough. */
export function checkBrokerable(mode: GatewayMode, env: Readonly<Record<string, string | undefined>>): void {
  if (mode !== "broker") return;
  const name = unbrokerableProvider(env);
  if (name === undefined) return;
  throw new WorkerConfigError(
    name,
    `${UNBROKERABLE_PROVIDERS[name]} requests are signed with the cloud's own credentials, which the model gateway cannot broker; ` +
      'set TURNSTREAM_GATEWAY=passthrough (option gateway: "passthrough") to run it as before, with each run holding the worker\'s cloud credentials',
  );
}

/**
 * What the worker's gateway asks of each request: `policies` in order (the tenants' budgets, the
 * caller's policy), then the fleet cooldown (on by default). The cooldown comes last because it holds
 * requests: one it lets go, as the probe or once the cooldown ended, must go upstream at once, and a
 * request another policy refuses should not be held first.
 */
export function workerGatewayPolicy(
  redis: RedisClient,
  settings: Pick<WorkerSettings, "cooldown" | "logPrefix">,
  policies: ReadonlyArray<GatewayPolicy | undefined>,
  logger: Logger,
): GatewayPolicy | undefined {
  const cooldown =
    settings.cooldown === undefined
      ? undefined
      : new FleetCooldown({ redis, prefix: settings.logPrefix, logger, ...settings.cooldown });
  const asked = [...policies, cooldown].filter((each): each is GatewayPolicy => each !== undefined);
  return asked.length === 0 ? undefined : composePolicies(...asked);
}

/** The worker's gateway and the tokens of its runs. */
export class WorkerModelAccess {
  readonly #gateway: Promise<ModelGateway>;
  readonly #settings: Pick<WorkerSettings, "runEnv" | "secretEnv">;
  readonly #logger: Logger;
  readonly #warm = new WarmTokens<RunGrant>();

  constructor(
    settings: Pick<WorkerSettings, "runEnv" | "secretEnv">,
    policy: GatewayPolicy | undefined,
    logger: Logger,
  ) {
    this.#settings = settings;
    this.#logger = logger;
    this.#gateway = startGateway({ policy, logger });
    this.#gateway.catch(() => undefined);
  }

  /** Resolves once the gateway listens (the worker's ready()). */
  async ready(): Promise<ModelGateway> {
    return this.#gateway;
  }

  /** The upstream a run with this env overlay would have used: its base URL and credential. */
  upstreamFor(overlay: Readonly<Record<string, string>>): Upstream {
    const env = { ...process.env, ...this.#settings.runEnv, ...overlay };
    // The operator's credential file, where the worker's scrubbers learn it (a job cannot move it).
    const credentialsPath = join(operatorConfigDir({ ...process.env, ...this.#settings.secretEnv }), CREDENTIALS_FILE);
    const credential = credentialFrom(env, credentialsPath);
    if (credential === undefined) throw new NoAuthError(credentialsPath);
    return { baseUrl: upstreamBaseUrl(env), credential };
  }

  /** Opens the attempt's access: a new token, or in warm mode the session's (bound to this attempt now). */
  async open(
    job: TurnJob,
    events: CallRecorder,
    overlay: Readonly<Record<string, string>>,
    warm: boolean,
  ): Promise<RunAccess> {
    const gateway = await this.#gateway;
    const sink = attemptSink(job, events, this.#logger);
    const kept = warm ? this.#warm.kept(job.session) : undefined;
    if (kept !== undefined) {
      kept.attach(sink);
      return { env: gatewayRunEnv(gateway, kept), grant: kept, session: job.session, reused: true };
    }
    const grant = gateway.issue(this.upstreamFor(overlay), sink);
    if (warm) this.#warm.hold(job.session, grant);
    return { env: gatewayRunEnv(gateway, grant), grant, session: warm ? job.session : undefined, reused: false };
  }

  /**
   * A warm turn that starts a new process gets a new token: the session's old one belongs to the
   * process it replaces, and ends with it.
   */
  async forNewProcess(
    access: RunAccess,
    use: WarmUse | undefined,
    overlay: Readonly<Record<string, string>>,
  ): Promise<RunAccess> {
    if (access.session === undefined || !access.reused || use?.label === "warm") return access;
    const gateway = await this.#gateway;
    const grant = gateway.issue(this.upstreamFor(overlay), access.grant.sink);
    this.#warm.hold(access.session, grant, access.grant);
    return { env: gatewayRunEnv(gateway, grant), grant, session: access.session, reused: false };
  }

  /**
   * Ends the attempt's access: the token is revoked, unless it is a warm session's whose process was
   * kept for the next turn; that one is bound to no turn until then, and revoked when the process ends.
   */
  close(access: RunAccess | undefined, warm: WarmUse | undefined): void {
    if (access === undefined) return;
    if (this.#warm.close(access.grant, access.session, warm)) access.grant.attach(undefined);
  }

  /** Revokes every token and stops the gateway (worker shutdown). */
  async closeAll(): Promise<void> {
    const gateway = await this.#gateway.catch(() => undefined);
    await gateway?.close();
  }
}

/** Where an attempt's model calls are recorded: its events (AttemptEvents), as far as the gateway needs them. */
export interface CallRecorder {
  readonly attempt: number;
  write(kind: "model.call", data: ModelCallData): Promise<void>;
  /** A policy of the gateway refused one of the attempt's calls, for `code` (`tenant_budget`, …). */
  refusedByPolicy(code: string): void;
}

/** Each call of the attempt becomes one model.call event, fenced like every append of the attempt. */
function attemptSink(job: TurnJob, events: CallRecorder, logger: Logger): CallSink {
  return {
    binding: { session: job.session, turn: job.turn, attempt: events.attempt, tenant: job.tenant },
    onCall: (call) => {
      if (call.refusedFor !== undefined) events.refusedByPolicy(call.refusedFor);
      events.write("model.call", modelCallData(call)).catch((err: unknown) => {
        logger.debug(
          { session: job.session, turn: job.turn, err: { message: (err as Error).message } },
          "model.call not written",
        );
      });
    },
  };
}
