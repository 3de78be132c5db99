// An archive from its URL: postgres:// or postgresql:// for the SQL store (`?schema=name` picks the
// schema, default public), file:///dir for the folder of gzip files.
import { fileURLToPath } from "node:url";
import type { Archive } from "./archive.ts";
import { InvalidArchiveUrlError } from "./errors.ts";
import { FileArchive } from "./file.ts";
import { DEFAULT_SCHEMA, PostgresArchive } from "./postgres.ts";

/** The URL as it may be shown: the password replaced, whatever else it holds kept. */
export function archiveUrlForDisplay(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "(an unparseable URL)";
  }
  if (parsed.password !== "") parsed.password = "***";
  // libpq-style URLs may carry the password as a parameter too.
  if (parsed.searchParams.has("password")) parsed.searchParams.set("password", "***");
  return parsed.toString();
}

/** The archive a URL names: `postgres://…` (or `postgresql://…`, `?schema=` picks the schema) or `file:///dir`. */
export function openArchive(url: string): Archive {
  const shown = archiveUrlForDisplay(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidArchiveUrlError(shown, "it is not a URL");
  }
  if (parsed.protocol === "postgres:" || parsed.protocol === "postgresql:") {
    const schema = parsed.searchParams.get("schema") ?? DEFAULT_SCHEMA;
    parsed.searchParams.delete("schema");
    return new PostgresArchive({ connectionString: parsed.toString(), schema, location: withoutPassword(shown) });
  }
  if (parsed.protocol === "file:") {
    if (parsed.host !== "" && parsed.host !== "localhost")
      throw new InvalidArchiveUrlError(shown, "a file URL names a folder on this machine (file:///dir)");
    if (parsed.search !== "") throw new InvalidArchiveUrlError(shown, "a file URL takes no parameters");
    return new FileArchive(fileURLToPath(parsed));
  }
  throw new InvalidArchiveUrlError(shown, `${parsed.protocol.replace(/:$/, "")} is not an archive store`);
}

function withoutPassword(shown: string): string {
  const parsed = new URL(shown);
  parsed.password = "";
  return parsed.toString();
}
