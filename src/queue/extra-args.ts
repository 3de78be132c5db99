// The CLI flags a queued turn may pass as `extraArgs`. A job is attacker input, and most flags change
// what the CLI loads or may do (--mcp-config, --plugin-dir, --setting-sources, --settings, --agents,
// --dangerously-skip-permissions, --debug-file, …), so only flags that shape the answer and grant
// nothing are let through, and a flag's value travels in the same argument (`--flag=value`): a
// separate value could be read as a flag of its own.

/** Flags taking no value. */
const SWITCHES = new Set([
  "--include-partial-messages",
  "--exclude-dynamic-system-prompt-sections",
  "--disable-slash-commands",
]);
/** Flags taking one value, given as `--flag=value`. */
const WITH_VALUE = new Set(["--fallback-model", "--effort", "--json-schema", "--betas"]);

/** The flags a queued turn may pass, for error messages and the README. */
export const ALLOWED_EXTRA_ARGS: readonly string[] = [...SWITCHES, ...[...WITH_VALUE].map((f) => `${f}=<value>`)];

/** Why `arg` may not be passed from a job, or undefined when it may. */
export function extraArgProblem(arg: string): string | undefined {
  const eq = arg.indexOf("=");
  const flag = eq === -1 ? arg : arg.slice(0, eq);
  if (SWITCHES.has(flag)) return eq === -1 ? undefined : `${flag} takes no value`;
  if (WITH_VALUE.has(flag))
    return eq === -1 || eq === arg.length - 1
      ? `${flag} needs its value in the same argument: ${flag}=<value>`
      : undefined;
  return `${JSON.stringify(flag)} is not a flag a queued turn may pass; allowed: ${ALLOWED_EXTRA_ARGS.join(", ")}`;
}
