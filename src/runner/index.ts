// Running one Claude Code CLI process. Knows nothing of Redis; imports only the protocol.
export { runTurn, type TurnHandle, type TurnOutcome, type RunTurnExtras, type CliErrorKind } from "./run-turn.ts";
export {
  ConfigHomeOptionsSchema,
  RunTurnOptionsSchema,
  validateRunTurnOptions,
  type RunTurnOptions,
  type SkillSpec,
  type ConfigHomeOptions,
} from "./options.ts";
export {
  ClaudeCodeCliError,
  LostSessionError,
  CliNotFoundError,
  LimitExceededError,
  type RunnerErrorKind,
} from "./errors.ts";
export { buildArgs } from "./args.ts";
export { runChecks, type CheckResult } from "./probe.ts";
export { describeLimits, type LimitName } from "./limits.ts";
export { baseEnv, buildEnv, cliSettingsEnv, envAuth, modelAccessEnv, type EnvOverlay } from "./env.ts";
export { resolveClaudeBin } from "./resolve-bin.ts";
export { probeToolSandbox, SANDBOX_INSTALL_HINT, type SandboxProbe, type ToolSandbox } from "./sandbox.ts";
export { processStartTime, ProcessTree, TREE_MARKER_VAR } from "./process-tree.ts";
export { startWatchdog, WATCHDOG_SCRIPT, watchdogEntry, type WatchdogHandle } from "./watchdog.ts";
export {
  containment,
  selectContainment,
  describeContainment,
  sweepCgroups,
  ContainmentError,
  CONTAINMENT_KINDS,
  type Containment,
  type ContainmentKind,
  type CgroupSweepResult,
} from "./containment.ts";
export {
  createConfigHome,
  sweep,
  sweepConfigHomes,
  defaultInstanceRoot,
  operatorConfigDir,
  NoAuthError,
  CREDENTIALS_FILE,
  type ConfigHome,
  type CreateConfigHomeOptions,
  type SweepOptions,
  type SweepResult,
  type AuthSource,
} from "./config-home.ts";
export { projectSlug, sessionFilePath, captureSessionFile, restoreSessionFile } from "./session-file.ts";
export { injectSkillsForRun, restoreSkillInjection } from "./skill-injection.ts";
export { WorkspaceFiles, WorkspacePathError, type WorkspacePathProblem } from "./workspace-files.ts";
export {
  installSkill,
  injectSkills,
  pointClaudeMdAtSkills,
  prepareSkillAddDir,
  SKILLS_DIR,
  type SkillAddDir,
} from "./skills.ts";
export { type Logger, silentLogger } from "../kernel/index.ts";
export {
  InMemorySessionStore,
  runThreadTurn,
  sameCwd,
  type SessionStore,
  type StoredSession,
  type ThreadTurnOptions,
  type ThreadTurnOutcome,
  type ThreadTurnHandle,
  type FreshReason,
} from "./sessions.ts";
export {
  claimInstanceSlot,
  defaultInstanceStem,
  instanceHolder,
  InstanceIdTakenError,
  type InstanceSlot,
} from "./instance-slot.ts";
export { lockState, type LockState } from "./live-lock.ts";
export { cliVersion } from "./probe.ts";
export type { RunLimits } from "./limits.ts";
export { Channel } from "./channel.ts";
export { WarmPool } from "./warm-pool.ts";
export { startWarmProcess, warmFingerprint, warmStartOptions, type WarmProcess } from "./warm-process.ts";
