// The built package for tests that use it (package, README and deployment tests): builds dist/
// unless it was built from the sources as they are now. `npm test` builds first, so there this only
// checks; a test file run on its own builds. flock serialises test processes that get here at once.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const distDir = join(repoRoot, "dist");

export function ensureBuilt(): void {
  const lockDir = join(repoRoot, ".tmp");
  mkdirSync(lockDir, { recursive: true });
  execFileSync(
    "flock",
    [join(lockDir, "build.lock"), process.execPath, join(repoRoot, "scripts", "build.ts"), "--if-stale"],
    {
      cwd: repoRoot,
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
}
