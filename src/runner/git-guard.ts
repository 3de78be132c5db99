// git in a turn whose workspace is not trusted. A workspace's own `.git/config` can name programs git
// runs by itself (core.fsmonitor on every status, hooks, a pager, an ssh command, credential helpers),
// and a `GIT_*` variable can point git at another repository, config or program. Measured with the
// pinned CLI: its own git calls (the git status in its system prompt, its settings checks) already
// pass `-c core.fsmonitor= -c core.hooksPath=/dev/null …` and replace GIT_CONFIG_* with their own;
// the git a slash command's `!` lines ran did not, which is why such turns run with
// `--disable-slash-commands` (args.ts). What is left is git a Bash tool call runs: the permission
// hook shows the operator `git status`, so that must not also run the workspace's fsmonitor.
//
// So the run's env keeps only the GIT_* names below (an allow-list: identity and prompting, nothing
// that names a path or a program) and adds command-scope config, which outranks every config file,
// switching off the programs a config file can name under a fixed key. Drivers under free names
// (filter.<x>.clean, diff.<x>.textconv) cannot be switched off this way; a Bash call that reaches them
// is still one the operator approved.

/** GIT_* variables a turn may still carry into an untrusted workspace. */
const KEPT = new Set([
  "GIT_AUTHOR_NAME",
  "GIT_AUTHOR_EMAIL",
  "GIT_AUTHOR_DATE",
  "GIT_COMMITTER_NAME",
  "GIT_COMMITTER_EMAIL",
  "GIT_COMMITTER_DATE",
  "GIT_TERMINAL_PROMPT",
]);

/** Config that outranks the workspace's files: each value leaves git's built-in behaviour. */
const OVERRIDES: ReadonlyArray<readonly [string, string]> = [
  ["core.fsmonitor", ""],
  ["core.hooksPath", "/dev/null"],
  ["core.pager", "cat"],
  ["core.askPass", ""],
  ["core.sshCommand", "ssh"],
  ["core.alternateRefsCommand", ""],
  // An empty value empties the list of helpers the config files named.
  ["credential.helper", ""],
  ["protocol.ext.allow", "never"],
  ["safe.bareRepository", "explicit"],
  ["submodule.recurse", "false"],
];

/** The run's env for an untrusted workspace: GIT_* outside KEPT removed, the overrides added. */
export function guardGit(env: Record<string, string>): void {
  for (const name of Object.keys(env)) if (name.startsWith("GIT_") && !KEPT.has(name)) delete env[name];
  env["GIT_CONFIG_COUNT"] = String(OVERRIDES.length);
  OVERRIDES.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
}
