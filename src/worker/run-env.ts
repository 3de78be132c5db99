// A run's environment: the job's overlay with its `{ fromEnv }` references resolved from the worker's
// environment, what the worker itself gives every run (its CLI telemetry last), and the scrubbers that
// know the values it brought.
import { cliSettingsEnv, modelAccessEnv, type EnvOverlay } from "../runner/index.ts";
import { firstRefusedEnvName, type TurnJob } from "../queue/index.ts";
import { cliTelemetryEnv, isCliTelemetryVar, type Scrubber } from "../telemetry/index.ts";
import type { WorkerSettings } from "./options.ts";

export interface RunEnv {
  /** The overlay, every reference resolved. */
  env: Record<string, string>;
  /** Each `{ fromEnv }` reference's value by the referenced name: a reference marks it secret, whatever the name. */
  refs: Map<string, string>;
}

const badPayload = (message: string): Error =>
  Object.assign(new Error(message), { kind: "bad_payload", retryable: false });

/** Throws a `bad_payload` error for a refused name or a reference the worker's environment does not set. */
export function resolveEnv(job: TurnJob, settings: Pick<WorkerSettings, "secretEnv" | "jobEnv">): RunEnv {
  const env: Record<string, string> = {};
  const refs = new Map<string, string>();
  const overlay = job.options.env ?? {};
  // Again here: a job written to Redis directly never met the producer's check.
  const refused = firstRefusedEnvName(Object.keys(overlay), settings.jobEnv);
  if (refused !== undefined) throw badPayload(`env ${refused.name} ${refused.why}`);
  for (const [name, overlayValue] of Object.entries(overlay)) {
    if (typeof overlayValue === "string") {
      env[name] = overlayValue;
      continue;
    }
    const value = settings.secretEnv[overlayValue.fromEnv];
    if (value === undefined) {
      throw badPayload(
        `env ${name} references ${overlayValue.fromEnv}, which this worker's environment does not set; set it on the worker or drop the reference`,
      );
    }
    env[name] = value;
    refs.set(overlayValue.fromEnv, value);
  }
  return { env, refs };
}

/**
 * The overlay a job's CLI starts with, over the minimal base runTurn builds (`isolate`): the worker's
 * CLI settings and model access from its own environment, its runEnv, the job's allowed names, then the
 * gateway's model access (which replaces the worker's credential with the run's token).
 */
export function runOverlay(
  settings: Pick<WorkerSettings, "hostEnv" | "runEnv">,
  run: Pick<RunEnv, "env"> & { modelEnv?: EnvOverlay | undefined; telemetryEnv?: EnvOverlay | undefined },
): EnvOverlay {
  const { hostEnv } = settings;
  // The gateway's overlay comes after the job's: it removes the worker's credentials and names itself.
  const overlay = {
    ...cliSettingsEnv(hostEnv),
    ...modelAccessEnv(hostEnv),
    ...settings.runEnv,
    ...run.env,
    ...run.modelEnv,
  };
  // The CLI's telemetry is the worker's alone to decide: none of these names from below (the worker's
  // OTEL_EXPORTER_OTLP_HEADERS may hold a collector's key), then its own overlay, on or off.
  for (const name of Object.keys(overlay)) if (isCliTelemetryVar(name)) delete overlay[name];
  return { ...overlay, ...(run.telemetryEnv ?? cliTelemetryEnv(undefined)) };
}

// Shorter referenced values are left to the name rules: redacting a short word everywhere would
// mangle ordinary text.
const MIN_REF_VALUE = 8;

export interface RunScrubbers {
  /** Logs, stderr, error messages, span texts: the worker's scrubber plus the overlay's secrets. */
  scrubber: Scrubber;
  /** Raw `cli.line` text and session files; undefined when the worker keeps them raw. */
  lines: Scrubber | undefined;
}

/** Scrubbers for one run: the worker's, plus the overlay's secrets and its references' values. */
export function runScrubbers(
  worker: { scrubber: Scrubber; lineScrubber: Scrubber; settings: Pick<WorkerSettings, "keepRawLines"> },
  run: RunEnv,
): RunScrubbers {
  const values: Array<[string, string]> = [];
  for (const [name, value] of run.refs) if (value.length >= MIN_REF_VALUE) values.push([name, value]);
  // The worker-wide scrubbers learn the references too (bounded: they come from the worker's own
  // env), so its logs and job records are covered after the run has ended.
  for (const [name, value] of values) {
    worker.scrubber.addValue(name, value);
    worker.lineScrubber.addValue(name, value);
  }
  return {
    scrubber: worker.scrubber.child(run.env, { values }),
    lines: worker.settings.keepRawLines ? undefined : worker.lineScrubber.child(run.env, { values }),
  };
}
