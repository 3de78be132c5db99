// argv for one `claude -p` turn. The prompt is never here: it goes on stdin, because argv is
// world-readable through /proc and ends up in process listings.
import type { CheckedRunTurnOptions as Opts } from "./options.ts";

export function buildArgs(options: Opts, extraAddDirs: readonly string[] = []): string[] {
  const args = ["-p", "--output-format", "stream-json", "--verbose"];
  if (options.model !== undefined) args.push("--model", options.model);
  if (options.resume !== undefined) args.push("--resume", options.resume);
  if (options.forkSession === true) args.push("--fork-session");
  if (options.permissionMode !== undefined) args.push("--permission-mode", options.permissionMode);
  if (options.skipPermissions === true) args.push("--dangerously-skip-permissions");
  if (options.settingsFile !== undefined) args.push("--settings", options.settingsFile);
  // `user` is the run's own config home (or the host's), never the workspace; MCP servers come only
  // from the caller's file; no slash command or skill runs its `!` lines (they never pass a hook).
  if (options.trustWorkspace !== true) {
    args.push("--setting-sources", "user", "--strict-mcp-config", "--disable-slash-commands");
  }
  if (options.mcpConfigFile !== undefined) args.push(`--mcp-config=${options.mcpConfigFile}`);
  const addDirs = [...(options.addDirs ?? []), ...extraAddDirs];
  // One flag per directory: the variadic form would swallow whatever option follows.
  for (const dir of addDirs) args.push(`--add-dir=${dir}`);
  if (options.maxTurns !== undefined) args.push("--max-turns", String(options.maxTurns));
  if (options.maxBudgetUsd !== undefined) args.push("--max-budget-usd", String(options.maxBudgetUsd));
  if (options.appendSystemPrompt !== undefined) args.push("--append-system-prompt", options.appendSystemPrompt);
  if (options.allowedTools !== undefined && options.allowedTools.length > 0)
    args.push(`--allowed-tools=${options.allowedTools.join(",")}`);
  if (options.disallowedTools !== undefined && options.disallowedTools.length > 0) {
    args.push(`--disallowed-tools=${options.disallowedTools.join(",")}`);
  }
  if (options.includePartialMessages === true) args.push("--include-partial-messages");
  if (options.includeHookEvents === true) args.push("--include-hook-events");
  if (options.extraArgs !== undefined) args.push(...options.extraArgs);
  return args;
}
