// argv for one `claude -p` turn. The prompt is never here: it goes on stdin, because argv is
// world-readable through /proc and ends up in process listings.
import type { CheckedRunTurnOptions as Opts } from "./options.ts";

export function buildArgs(o: Opts, extraAddDirs: readonly string[] = []): string[] {
  const args = ["-p", "--output-format", "stream-json", "--verbose"];
  if (o.model !== undefined) args.push("--model", o.model);
  if (o.resume !== undefined) args.push("--resume", o.resume);
  if (o.forkSession === true) args.push("--fork-session");
  if (o.permissionMode !== undefined) args.push("--permission-mode", o.permissionMode);
  if (o.skipPermissions === true) args.push("--dangerously-skip-permissions");
  if (o.settingsFile !== undefined) args.push("--settings", o.settingsFile);
  // `user` is the run's own config home (or the host's), never the workspace; MCP servers come only
  // from the caller's file; no slash command or skill runs its `!` lines (they never pass a hook).
  if (o.trustWorkspace !== true) {
    args.push("--setting-sources", "user", "--strict-mcp-config", "--disable-slash-commands");
  }
  if (o.mcpConfigFile !== undefined) args.push(`--mcp-config=${o.mcpConfigFile}`);
  const addDirs = [...(o.addDirs ?? []), ...extraAddDirs];
  // One flag per directory: the variadic form would swallow whatever option follows.
  for (const dir of addDirs) args.push(`--add-dir=${dir}`);
  if (o.maxTurns !== undefined) args.push("--max-turns", String(o.maxTurns));
  if (o.maxBudgetUsd !== undefined) args.push("--max-budget-usd", String(o.maxBudgetUsd));
  if (o.appendSystemPrompt !== undefined) args.push("--append-system-prompt", o.appendSystemPrompt);
  if (o.allowedTools !== undefined && o.allowedTools.length > 0)
    args.push(`--allowed-tools=${o.allowedTools.join(",")}`);
  if (o.disallowedTools !== undefined && o.disallowedTools.length > 0) {
    args.push(`--disallowed-tools=${o.disallowedTools.join(",")}`);
  }
  if (o.includePartialMessages === true) args.push("--include-partial-messages");
  if (o.includeHookEvents === true) args.push("--include-hook-events");
  if (o.extraArgs !== undefined) args.push(...o.extraArgs);
  return args;
}
