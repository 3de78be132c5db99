// `npm run build`: the published package in dist/ — tsc's JavaScript, declarations and source maps
// for src/, plus the files the code reads at run time beside itself (Lua scripts, the hook
// forwarder), which tsc does not copy. `--if-stale` skips the build when dist/ was built from the
// inputs as they are now (tests call it that way; see test/support/build.ts). Each subpath of the
// package (src/entries/) is a module of its own, so every file `exports` names is checked to exist.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");
const dist = join(root, "dist");
/** Written last: the fingerprint of the inputs dist/ was built from (not shipped: see package.json files). */
const stampFile = join(dist, ".build-stamp");
/**
 * Run-time assets: files under src/ that code opens with `new URL("./…", import.meta.url)` (the dashboard's page files
 * too).
 */
export const ASSET_PATTERN = /\.(lua|mjs)$|\/dashboard\/static\/[^/]+\.(html|css|js)$/;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** A hash of everything the build reads, so an unchanged tree is not built twice. */
function inputsFingerprint(): string {
  const hash = createHash("sha256");
  const inputs = [
    ...filesUnder(src),
    ...["package.json", "tsconfig.json", "tsconfig.build.json", "scripts/build.ts"].map((f) => join(root, f)),
  ];
  for (const file of inputs) hash.update(relative(root, file)).update("\0").update(readFileSync(file)).update("\0");
  return hash.digest("hex");
}

function compile(): void {
  execFileSync(join(root, "node_modules", ".bin", "tsc"), ["-p", join(root, "tsconfig.build.json")], {
    cwd: root,
    stdio: "inherit",
  });
}

function copyAssets(): void {
  for (const file of filesUnder(src).filter((f) => ASSET_PATTERN.test(f))) {
    const to = join(dist, relative(src, file));
    mkdirSync(dirname(to), { recursive: true });
    cpSync(file, to);
  }
}

/** Every file package.json's `exports` points at, relative to the package root. */
function exportTargets(): string[] {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    exports: Record<string, string | Record<string, string>>;
  };
  return Object.values(pkg.exports).flatMap((target) =>
    typeof target === "string" ? [target] : Object.values(target),
  );
}

/** A subpath whose built module or declarations are missing would install fine and fail at import: fail here. */
function checkExportTargets(): void {
  const missing = exportTargets().filter((target) => !existsSync(join(root, target)));
  if (missing.length > 0) throw new Error(`package.json exports files the build did not write: ${missing.join(", ")}`);
}

function build(fingerprint: string): void {
  rmSync(dist, { recursive: true, force: true });
  compile();
  copyAssets();
  checkExportTargets();
  writeFileSync(stampFile, fingerprint + "\n");
}

function main(argv: string[]): void {
  const fingerprint = inputsFingerprint();
  const fresh = existsSync(stampFile) && readFileSync(stampFile, "utf8").trim() === fingerprint;
  if (argv.includes("--if-stale") && fresh) return;
  build(fingerprint);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
