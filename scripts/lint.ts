// `npm run lint`: Prettier's check and ESLint's rules (lint/eslint.config.js) over the whole tree.
// The linters live in lint/ with a lockfile of their own: typescript-eslint parses with TypeScript's
// JavaScript API, which the project's TypeScript 7 compiler does not ship. They are installed from
// that lockfile on first use, and again whenever the lockfile changes. `--fix` writes what the
// formatter would print instead of only checking it.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const lintDir = join(root, "lint");
const bin = (name: string): string => join(lintDir, "node_modules", ".bin", name);

/** npm writes the installed tree's lockfile copy here; it matches ours once `npm ci` has run. */
function installedFromLockfile(): boolean {
  const installed = join(lintDir, "node_modules", ".package-lock.json");
  if (!existsSync(installed)) return false;
  const wanted = JSON.parse(readFileSync(join(lintDir, "package-lock.json"), "utf8")) as { packages: object };
  const have = JSON.parse(readFileSync(installed, "utf8")) as { packages: Record<string, unknown> };
  return Object.keys(wanted.packages).every((path) => path === "" || path in have.packages);
}

/** Runs a tool with its output on ours; a failing tool ends the script with its status, after saying which. */
function run(file: string, args: string[]): void {
  const result = spawnSync(file, args, { cwd: root, stdio: "inherit" });
  if (result.status === 0) return;
  const how = result.error?.message ?? (result.signal !== null ? `signal ${result.signal}` : `exit ${result.status}`);
  process.stderr.write(`lint: ${file.split("/").pop()} failed (${how}); \`npm run lint -- --fix\` formats\n`);
  process.exit(result.status ?? 1);
}

if (!installedFromLockfile()) run("npm", ["ci", "--prefix", lintDir, "--no-audit", "--no-fund", "--silent"]);
const fix = process.argv.includes("--fix");
run(bin("prettier"), [fix ? "--write" : "--check", "--log-level", "warn", "**/*.{ts,mjs,js,css}"]);
run(bin("eslint"), ["--config", join(lintDir, "eslint.config.js"), "--max-warnings", "0", "."]);
