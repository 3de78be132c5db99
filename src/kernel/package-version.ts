// The installed package's version, for `turnstream --version` and the worker registry.
import { readFileSync } from "node:fs";

let version: string | undefined;

/** The package's version: package.json sits two levels up from both src/kernel/ and dist/kernel/. */
export function packageVersion(): string {
  try {
    return (version ??= (
      JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    ).version);
  } catch {
    return (version = "unknown");
  }
}
