// `npm run bench -- <name> [args]`: runs bench/<name>.ts in this process. Each benchmark prints its
// figures and ends with one JSON line carrying "bench" and its ratio.
import { existsSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const names = readdirSync(here)
  .filter((f) => f.endsWith(".ts") && f !== "run.ts" && !f.startsWith("_"))
  .map((f) => f.slice(0, -3))
  .sort();
const [name, ...rest] = process.argv.slice(2);
if (name === undefined || !/^[a-z][a-z-]*$/.test(name) || !existsSync(join(here, `${name}.ts`))) {
  process.stderr.write(`usage: npm run bench -- <name>\nbenchmarks: ${names.join(", ")}\n`);
  process.exit(2);
}
process.argv = [process.argv[0]!, join(here, `${name}.ts`), ...rest];
await import(join(here, `${name}.ts`));
