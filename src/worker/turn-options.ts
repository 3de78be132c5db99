// The options a turn's CLI starts with: the job's, under the worker's settings and a supervised turn's
// rules. Read twice in an attempt: by the warm decision (which process fits the run) and to start the run.
import { dirname } from "node:path";
import type { RunTurnExtras, RunTurnOptions } from "../runner/index.ts";
import type { Attempt, PreparedRun } from "./attempt-context.ts";
import { runLimitsFor } from "./limits.ts";
import { runOverlay } from "./run-env.ts";

/** runTurn's options for this attempt: the job's, under the worker's settings and a supervised turn's rules. */
export function runTurnOptions(attempt: Attempt, run: PreparedRun): RunTurnOptions & RunTurnExtras {
  const { worker, job, control, events } = attempt;
  const { settings } = worker;
  const options = job.options;
  const { supervised, snapshot, resume } = run;
  return {
    cwd: job.cwd,
    prompt: run.prompt,
    model: options.model,
    resume,
    // The snapshot's file only when this run resumes its session.
    sessionFile: snapshot !== undefined && resume === snapshot.cliSessionId ? snapshot.bytes : undefined,
    permissionMode: options.permissionMode,
    skipPermissions: options.skipPermissions,
    // Only a job that asks to skip permissions claims the worker's sandbox.
    sandboxed: options.skipPermissions !== undefined ? settings.sandboxed : undefined,
    maxTurns: options.maxTurns,
    maxBudgetUsd: options.maxBudgetUsd,
    appendSystemPrompt: options.appendSystemPrompt,
    allowedTools:
      options.allowedTools === undefined || supervised === undefined
        ? options.allowedTools
        : supervised.allowedToolsFilter(options.allowedTools),
    disallowedTools: options.disallowedTools,
    timeoutMs: options.timeoutMs,
    inactivityTimeoutMs: options.inactivityTimeoutMs,
    limits: runLimitsFor(options, settings.limits),
    trustWorkspace: options.trustWorkspace,
    skills: options.skills,
    skillsMode: options.skillsMode,
    addDirs: options.addDirs,
    settingsFile: options.settingsFile,
    // Composed with the supervised hook's settings (or the job's) into the run's one settings file.
    toolSandbox: sandboxOf(run),
    extraArgs: supervised === undefined ? options.extraArgs : supervised.argsFilter(options.extraArgs),
    mcpConfigFile: settings.mcpConfigFile,
    // After the job's own, so nothing above can loosen it: the hook's settings, default mode, no skipping.
    ...supervised?.turnOptions,
    claudeBin: settings.claudeBin,
    // The minimal base, then only what the worker gives and the job's allowed names: no worker variable leaks.
    env: runOverlay(settings, run),
    isolate: true,
    killGraceMs: settings.killGraceMs,
    signal: control.ac.signal,
    logger: worker.logger,
    configHome: {
      instanceId: settings.instanceId,
      instanceRoot: settings.instanceRoot,
      runId: `${job.turn}.${events.attempt}.${events.epoch}`,
      // A brokered run's home holds no credential: the gateway has it.
      credential: run.modelEnv === undefined ? undefined : "none",
    },
  };
}

/** The run's tool sandbox; a supervised run's tools may not read its hook's token either. */
function sandboxOf(run: PreparedRun): RunTurnOptions["toolSandbox"] {
  const { toolSandbox, supervised } = run;
  if (toolSandbox === undefined || supervised === undefined) return toolSandbox;
  return { ...toolSandbox, denyRead: [...toolSandbox.denyRead, dirname(supervised.runFile)] };
}
