#!/usr/bin/env node
// The `turnstream` command: a thin dispatcher. Each subcommand lives in ./commands/<name>.ts and
// exports `summary` (one line for help) and `run(argv)` resolving to an exit code; commands are
// loaded on demand so one command's dependencies never slow another's start.
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

interface CommandModule {
  summary: string;
  run(argv: string[]): Promise<number>;
}

const commandsDir = join(dirname(fileURLToPath(import.meta.url)), "commands");

function commandNames(): string[] {
  return readdirSync(commandsDir)
    .filter((f) => f.endsWith(".ts") && !f.startsWith("_"))
    .map((f) => f.slice(0, -3))
    .sort();
}

async function load(name: string): Promise<CommandModule> {
  return (await import(join(commandsDir, `${name}.ts`))) as CommandModule;
}

async function help(): Promise<void> {
  const lines = ["usage: turnstream <command> [options]", "", "commands:"];
  for (const name of commandNames()) {
    lines.push(`  ${name.padEnd(14)} ${(await load(name)).summary}`);
  }
  lines.push("", "Run `turnstream <command> --help` for a command's options.");
  process.stdout.write(lines.join("\n") + "\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    await help();
    return name === undefined ? 2 : 0;
  }
  if (!/^[a-z][a-z-]*$/.test(name) || !commandNames().includes(name)) {
    process.stderr.write(`turnstream: unknown command '${name}'; run 'turnstream --help' for the list\n`);
    return 2;
  }
  return (await load(name)).run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`turnstream: ${message}\n`);
    process.exitCode = 1;
  },
);
