#!/usr/bin/env node
// The `turnstream` command: a thin dispatcher. Each subcommand lives in ./commands/<name>.ts and
// exports `summary` (one line for help) and `run(argv)` resolving to an exit code; commands are
// loaded on demand so one command's dependencies never slow another's start.
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, extname, join } from "node:path";
import { packageVersion } from "../kernel/index.ts";
import { EXIT } from "./exit-codes.ts";

interface CommandModule {
  summary: string;
  run(argv: string[]): Promise<number>;
}

const self = fileURLToPath(import.meta.url);
const commandsDir = join(dirname(self), "commands");
// Run from the sources the commands are .ts files; from the built package (dist/) they are .js,
// next to their .d.ts declarations.
const ext = extname(self);

function commandNames(): string[] {
  return readdirSync(commandsDir)
    .filter((f) => f.endsWith(ext) && !f.endsWith(`.d${ext}`) && !f.startsWith("_"))
    .map((f) => f.slice(0, -ext.length))
    .sort();
}

async function load(name: string): Promise<CommandModule> {
  return (await import(join(commandsDir, `${name}${ext}`))) as CommandModule;
}

async function help(): Promise<void> {
  const lines = ["usage: turnstream <command> [options]", "       turnstream --version", "", "commands:"];
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
    return name === undefined ? EXIT.usage : EXIT.finished;
  }
  if (name === "--version" || name === "-v") {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  if (!/^[a-z][a-z-]*$/.test(name) || !commandNames().includes(name)) {
    process.stderr.write(`turnstream: unknown command '${name}'; run 'turnstream --help' for the list\n`);
    return EXIT.usage;
  }
  commandName = name;
  return (await load(name)).run(rest);
}

let commandName: string | undefined;

// A command that throws met something outside the call's control (Redis unreachable or gone, a
// failing dependency): one line, no stack trace, and exit 3 so a pipeline retries the job.

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  async (err: unknown) => {
    // Loaded only on this path: the log's index brings ioredis, which `--version` and `help` never need.
    const { explainRedisError, redisUrlForDisplay } = await import("../log/index.ts");
    // Redis's own errors (ioredis' "max retries per request", ECONNREFUSED…) say which Redis and what to check.
    const message = explainRedisError(err, redisUrlForDisplay()).message;
    process.stderr.write(
      `turnstream${commandName === undefined ? "" : ` ${commandName}`}: ${message.split("\n")[0]}\n`,
    );
    process.exitCode = EXIT.infrastructure;
  },
);
