// The CLI's own telemetry, joined into the attempt's trace and the worker's metrics. With the
// worker's tracing or metrics on (and TURNSTREAM_CLI_TELEMETRY not `off`) the worker runs one loopback
// OTLP receiver, and each CLI process gets a token of its own, and while the worker traces,
// TRACEPARENT naming the attempt span that started it. A cold
// run's token lives for its attempt. A warm session's kept process cannot have its env changed
// between turns (as with its gateway token, model-access.ts): its token lives as long as the process,
// each turn binds it to that turn's attempt, and the receiver moves spans that started after the
// bind under that attempt's span (their TRACEPARENT still names the first one).
import type { Logger } from "../kernel/index.ts";
import type { TraceIds } from "../events/index.ts";
import type { TurnJob } from "../queue/index.ts";
import type { EnvOverlay } from "../runner/index.ts";
import {
  cliTelemetryEnv,
  formatTraceparent,
  startCliOtlpReceiver,
  type CliOtlpReceiver,
  type CliMetricsSink,
  type CliTelemetryGrant,
  type Scrubber,
  type Telemetry,
} from "../telemetry/index.ts";
import type { WarmUse } from "./warm.ts";
import { WarmTokens } from "./warm-tokens.ts";

/** The scrubber name of a CLI's telemetry token (the agent's tools can read it in their env). */
export const CLI_TELEMETRY_TOKEN_NAME = "CLI_TELEMETRY_TOKEN";

/** One attempt's CLI telemetry: the env overlay and the token behind it. */
export interface CliTelemetryAccess {
  env: EnvOverlay;
  grant: CliTelemetryGrant;
  /** The warm session whose token this is (it outlives the attempt while its process is kept). */
  session: string | undefined;
  /** A warm session's token from an earlier turn (its kept process may answer this one). */
  reused: boolean;
}

/** What an attempt binds its CLI's token to. */
export interface AttemptSpan {
  trace: TraceIds;
  /** When the attempt started (ISO). */
  startedAt: string;
  /** The run's scrubber: the received spans' texts pass it. */
  scrubber: Scrubber;
}

/** Where the CLIs' telemetry goes: spans to the worker's tracing, metrics to its meter (each when on). */
export interface CliTelemetrySinks {
  /** The worker's tracing, when it traces. */
  telemetry: Pick<Telemetry, "emit"> | undefined;
  /** The worker's metrics, when it keeps metrics. */
  metrics: CliMetricsSink | undefined;
}

export class WorkerCliTelemetry {
  readonly #receiver: Promise<CliOtlpReceiver>;
  readonly #content: boolean;
  readonly #metrics: boolean;
  readonly #warm = new WarmTokens<CliTelemetryGrant>();

  constructor(sinks: CliTelemetrySinks, content: boolean, logger: Logger) {
    this.#content = content;
    this.#metrics = sinks.metrics !== undefined;
    const { telemetry } = sinks;
    this.#receiver = startCliOtlpReceiver({
      emit: (spans) => telemetry?.emit(spans),
      metrics: sinks.metrics,
      content,
      logger,
    });
    this.#receiver.catch(() => undefined);
  }

  /** Resolves once the receiver listens. */
  ready(): Promise<CliOtlpReceiver> {
    return this.#receiver;
  }

  /**
   * The attempt's token: a new one, or in warm mode the session's (its kept process has it). `trace`:
   * the attempt span, undefined when the worker does not trace (the CLI then sends metrics only).
   */
  async open(job: TurnJob, trace: TraceIds | undefined, warm: boolean): Promise<CliTelemetryAccess> {
    const receiver = await this.#receiver;
    const kept = warm ? this.#warm.kept(job.session) : undefined;
    if (kept !== undefined) return { env: this.#env(receiver, kept), grant: kept, session: job.session, reused: true };
    const grant = receiver.issue(trace);
    if (warm) this.#warm.hold(job.session, grant);
    return { env: this.#env(receiver, grant), grant, session: warm ? job.session : undefined, reused: false };
  }

  /** A warm turn that starts a new process gets a new token, under this attempt's span. */
  async forNewProcess(
    access: CliTelemetryAccess,
    use: WarmUse | undefined,
    trace: TraceIds | undefined,
  ): Promise<CliTelemetryAccess> {
    if (access.session === undefined || !access.reused || use?.label === "warm") return access;
    const receiver = await this.#receiver;
    const grant = receiver.issue(trace);
    this.#warm.hold(access.session, grant, access.grant);
    return { env: this.#env(receiver, grant), grant, session: access.session, reused: false };
  }

  /** The CLI's spans that start from now on belong to this attempt. */
  bind(access: CliTelemetryAccess, attempt: AttemptSpan): void {
    const { traceId, spanId } = attempt.trace;
    access.grant.bind({ traceId, spanId, startMs: Date.parse(attempt.startedAt), scrubber: attempt.scrubber });
  }

  /** Ends the attempt's token, unless a warm session's process was kept: that one ends with its process. */
  close(access: CliTelemetryAccess | undefined, warm: WarmUse | undefined): void {
    if (access !== undefined) this.#warm.close(access.grant, access.session, warm);
  }

  #env(receiver: CliOtlpReceiver, grant: CliTelemetryGrant): EnvOverlay {
    const traced = grant.process.traceId !== "";
    return cliTelemetryEnv({
      url: receiver.url,
      token: grant.token,
      traceparent: traced ? formatTraceparent(grant.process) : undefined,
      metrics: this.#metrics,
      content: this.#content,
    });
  }

  /** Revokes every token and stops the receiver (worker shutdown, after its runs have ended). */
  async closeAll(): Promise<void> {
    const receiver = await this.#receiver.catch(() => undefined);
    await receiver?.close();
  }
}
