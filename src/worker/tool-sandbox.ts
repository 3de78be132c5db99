// The worker's tool sandbox: every turn whose workspace is not trusted runs its tools in the CLI's
// sandbox (bwrap), with the network allow-list the operator set (empty by default) and the worker's
// own files unreadable. A job may narrow the allow-list (`options.sandbox.allowDomains`), never widen
// it. A worker that cannot sandbox refuses untrusted turns, unless its operator opted out by name
// (TURNSTREAM_TOOL_SANDBOX=off), which the worker logs as a warning when it starts.
import { homedir } from "node:os";
import {
  defaultInstanceRoot,
  operatorConfigDir,
  probeToolSandbox,
  SANDBOX_INSTALL_HINT,
  type SandboxProbe,
  type ToolSandbox,
} from "../runner/index.ts";
import type { FailureKind } from "../events/index.ts";
import type { Logger } from "../kernel/index.ts";
import type { TurnJob } from "../queue/index.ts";

/** `on` (default): untrusted turns are sandboxed or refused. `off`: the operator's decision to run them unconfined. */
export type ToolSandboxMode = "on" | "off";

export interface ToolSandboxOptions {
  mode?: ToolSandboxMode | undefined;
  /** Hosts tools may reach (TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS); `*.example.com` covers its subdomains. */
  allowDomains?: readonly string[] | undefined;
  /** More paths tools may not read (TURNSTREAM_TOOL_SANDBOX_DENY_READ), beside the worker's own. */
  denyRead?: readonly string[] | undefined;
}

export interface ToolSandboxSettings {
  mode: ToolSandboxMode;
  allowDomains: readonly string[];
  denyRead: readonly string[];
  /** Whether the sandbox works for the run's PATH; probed once, on first use. */
  probe(): SandboxProbe;
}

export const TOOL_SANDBOX_OPT_OUT = "TURNSTREAM_TOOL_SANDBOX=off";

/**
 * What no tool may read: the worker's instance root (every run's home), the operator's CLI config, its
 * HOME, and the workspace roots, so one turn cannot read another's checkout (its own cwd and added
 * directories are allowed again by the run).
 */
function workerPaths(instanceRoot: string | undefined, workspaceRoots: readonly string[]): string[] {
  const home = process.env["HOME"] ?? homedir();
  return [instanceRoot ?? defaultInstanceRoot(), operatorConfigDir(), home, ...workspaceRoots];
}

/** Where the worker and its runs live. */
export interface ToolSandboxHost {
  instanceRoot: string | undefined;
  workspaceRoots: readonly string[];
  /** The PATH the CLI runs get, where bwrap and socat must be. */
  runPath: string | undefined;
}

export function compileToolSandbox(
  options: ToolSandboxOptions | undefined,
  host: ToolSandboxHost,
): ToolSandboxSettings {
  let probed: SandboxProbe | undefined;
  const denyRead = [...workerPaths(host.instanceRoot, host.workspaceRoots), ...(options?.denyRead ?? [])];
  return {
    mode: options?.mode ?? "on",
    allowDomains: [...(options?.allowDomains ?? [])],
    denyRead: [...new Set(denyRead)],
    probe: () => (probed ??= probeToolSandbox(host.runPath)),
  };
}

/** Logged once at start: an operator who switched the sandbox off, or a host that cannot sandbox. */
export function announceToolSandbox(settings: ToolSandboxSettings, logger: Logger): void {
  if (settings.mode === "off") {
    const what = "tool sandbox is OFF: tools of untrusted turns run unconfined (network, writes, this worker's files)";
    logger.warn({ setting: TOOL_SANDBOX_OPT_OUT }, what);
    return;
  }
  const probe = settings.probe();
  if (probe.ok) return;
  const what = `tool sandbox unavailable, untrusted turns will be refused: ${SANDBOX_INSTALL_HINT}`;
  logger.warn({ reason: probe.detail, optOut: TOOL_SANDBOX_OPT_OUT }, what);
}

/** Whether a worker allow-list entry covers a job's entry (a `*.` entry covers its subdomains). */
function covers(workerEntry: string, jobEntry: string): boolean {
  const workerLower = workerEntry.toLowerCase();
  const jobLower = jobEntry.toLowerCase();
  if (workerLower === jobLower) return true;
  if (!workerLower.startsWith("*.")) return false;
  return jobLower.replace(/^\*\./, "").endsWith(workerLower.slice(1));
}

export interface SandboxRefusal {
  errorKind: FailureKind;
  name: string;
  message: string;
}

export type SandboxDecision = { sandbox: ToolSandbox | undefined } | { refused: SandboxRefusal };

/** The sandbox a job's run gets (undefined: unsandboxed), or why this worker will not run it. */
export function toolSandboxFor(job: TurnJob, settings: ToolSandboxSettings): SandboxDecision {
  if (job.options.trustWorkspace === true || settings.mode === "off") return { sandbox: undefined };
  const probe = settings.probe();
  if (!probe.ok) {
    const why = `this worker cannot sandbox the tools of a turn whose workspace is not trusted: ${probe.detail}`;
    const message = `${why}; or set ${TOOL_SANDBOX_OPT_OUT} on the worker to run them unconfined`;
    return { refused: { errorKind: "sandbox_unavailable", name: "SandboxUnavailable", message } };
  }
  const asked = job.options.sandbox?.allowDomains;
  const wider = (asked ?? []).findIndex((d) => !settings.allowDomains.some((w) => covers(w, d)));
  if (wider >= 0) {
    const allowed = settings.allowDomains.length === 0 ? "none" : settings.allowDomains.join(", ");
    const field = `options.sandbox.allowDomains.${wider}: ${asked![wider]}`;
    const rule = "a turn may only narrow it (TURNSTREAM_TOOL_SANDBOX_ALLOW_DOMAINS)";
    const message = `${field} is not in this worker's tool network allow-list (${allowed}); ${rule}`;
    return { refused: { errorKind: "bad_options", name: "SandboxWidened", message } };
  }
  return { sandbox: { allowDomains: asked ?? settings.allowDomains, denyRead: settings.denyRead } };
}
