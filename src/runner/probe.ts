// Health checks behind `turnstream doctor`: the binary, the cwd, auth, how runs are contained, and
// one live turn.
import { execFile } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { createConfigHome, operatorConfigDir, CREDENTIALS_FILE } from "./config-home.ts";
import { containment, describeContainment, type Containment } from "./containment.ts";
import { envAuth } from "./env.ts";
import { ClaudeCodeCliError } from "./errors.ts";
import { resolveClaudeBin } from "./resolve-bin.ts";
import { runTurn } from "./run-turn.ts";
import { sandboxCheck } from "./sandbox.ts";

export type CheckStatus = "pass" | "warn" | "fail";
export interface CheckResult {
  name: string;
  status: CheckStatus;
  detail: string;
}

export const PROBE_PROMPT = "Respond with hello.";

export function cliVersion(bin: string, timeoutMs = 15000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(bin, ["--version"], { timeout: timeoutMs, env: { ...process.env, FORCE_COLOR: "0" } }, (err, stdout) => {
      if (err !== null) reject(err);
      else resolve(stdout.trim());
    });
  });
}

export interface DoctorOptions {
  cwd: string;
  env?: Record<string, string | undefined> | undefined;
  claudeBin?: string | undefined;
  probeTimeoutMs?: number | undefined;
  instanceRoot?: string | undefined;
}

/** The kind, what it means, and why the better kinds are not in use. */
function containmentDetail(chosen: Containment): string {
  const skipped = chosen.skipped.map((s) => `${s.kind}: ${s.reason}`).join("; ");
  return `${chosen.kind}: ${describeContainment(chosen.kind)}${skipped === "" ? "" : ` (not used: ${skipped})`}`;
}

type Report = (name: string, status: CheckStatus, detail: string) => void;

/** The claude binary, if it resolves and runs `--version`. */
async function checkCli(
  options: DoctorOptions,
  env: Record<string, string | undefined>,
  report: Report,
): Promise<string | undefined> {
  let bin: string | undefined;
  try {
    bin = resolveClaudeBin({ claudeBin: options.claudeBin, env });
    report("cli", "pass", `${bin} (${await cliVersion(bin)})`);
    return bin;
  } catch (err) {
    report(
      "cli",
      "fail",
      bin === undefined ? (err as Error).message : `${bin} does not run: ${(err as Error).message.split("\n")[0]}`,
    );
    return undefined;
  }
}

/** Whether the cwd is absolute and can be created and written. */
function checkCwd(cwd: string, report: Report): boolean {
  if (!isAbsolute(cwd)) {
    report("cwd", "fail", `${cwd} is not an absolute path; pass --cwd /absolute/dir`);
    return false;
  }
  try {
    const existed = existsSync(cwd);
    mkdirSync(cwd, { recursive: true });
    accessSync(cwd, constants.W_OK | constants.X_OK);
    report("cwd", "pass", `${cwd} ${existed ? "exists and is writable" : "created"}`);
    return true;
  } catch (err) {
    report("cwd", "fail", `${cwd} cannot be created or written (${(err as NodeJS.ErrnoException).code ?? "error"})`);
    return false;
  }
}

/** Whether runs can authenticate: through the environment or the operator's credential file. */
function checkAuth(env: Record<string, string | undefined>, report: Report): boolean {
  const viaEnv = envAuth(env);
  const credential = join(operatorConfigDir(env), CREDENTIALS_FILE);
  if (viaEnv !== undefined) report("auth", "pass", `from the environment (${viaEnv.replace("_", " ")})`);
  else if (existsSync(credential)) report("auth", "pass", `subscription credential at ${credential}`);
  else {
    report(
      "auth",
      "fail",
      `no ANTHROPIC_API_KEY / auth token in the environment and no credential at ${credential}; run \`claude auth login\``,
    );
    return false;
  }
  return true;
}

/** One live stream-json turn in a per-run config home. */
async function probeTurn(
  options: DoctorOptions,
  env: Record<string, string | undefined>,
  bin: string,
  report: Report,
): Promise<void> {
  try {
    const handle = runTurn({
      cwd: options.cwd,
      prompt: PROBE_PROMPT,
      claudeBin: bin,
      maxTurns: 1,
      timeoutMs: options.probeTimeoutMs ?? 45000,
      configHome: { instanceId: "doctor", instanceRoot: options.instanceRoot },
      env: { ...env },
    });
    const outcome = await handle.outcome;
    const text = (outcome.resultText ?? "").trim();
    const said = text.length > 60 ? `${text.slice(0, 60)}…` : text;
    report(
      "probe",
      /hello/i.test(text) ? "pass" : "warn",
      `stream-json turn finished in ${outcome.durationMs} ms (${outcome.lineCount} lines, session ${outcome.sessionId ?? "?"}); reply: ${JSON.stringify(said)}`,
    );
  } catch (err) {
    const detail =
      err instanceof ClaudeCodeCliError
        ? `${err.message} (kind ${err.kind}${err.apiErrorStatus === undefined ? "" : `, status ${err.apiErrorStatus}`})`
        : (err as Error).message;
    report("probe", "fail", detail);
  }
}

export async function runChecks(
  options: DoctorOptions,
  onResult: (result: CheckResult) => void = () => {},
): Promise<CheckResult[]> {
  const env = options.env ?? process.env;
  const results: CheckResult[] = [];
  const report: Report = (name, status, detail) => {
    const result = { name, status, detail };
    results.push(result);
    onResult(result);
  };
  const bin = await checkCli(options, env, report);
  const cwdOk = checkCwd(options.cwd, report);
  const authOk = checkAuth(env, report);
  const contained = containment();
  report("contain", contained.kind === "proc-walk" ? "warn" : "pass", containmentDetail(contained));
  const sandbox = sandboxCheck(env);
  report("sandbox", sandbox.status, sandbox.detail);
  if (bin === undefined || !cwdOk || !authOk) report("probe", "fail", "skipped: fix the failures above first");
  else await probeTurn(options, env, bin, report);
  return results;
}
