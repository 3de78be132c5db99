// What counts as the same text in two runs of one turn: the parts that differ between any two runs
// (where the run happened, generated ids, clock times) are replaced by markers, so a re-run is held to
// what its tools actually did. The scripted server checks a request's tool results with it, and
// `turnstream rerun` compares two runs with it, so both judge the same way. The README lists the rules.
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi;
const TOOL_USE_ID = /\btoolu_[A-Za-z0-9_-]+/g;
const ISO_TIME = /\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})\b/g;

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * A directory made by mkdtemp under the system temp dir (a name ending in `-` and six characters): its path up to that
 * name.
 */
function tempDirPattern(): RegExp {
  const root = tmpdir().replace(/\/+$/, "");
  return new RegExp(`${escapeRegExp(root)}/[A-Za-z0-9._-]*-[A-Za-z0-9]{6}(?=/|\\b|$)`, "g");
}

/**
 * `text` with the run's own details replaced: the working directory `cwd` by `<cwd>`, other
 * mkdtemp-made directories under the temp dir by `<tmp>`, UUIDs (session ids) by `<uuid>`, tool-use
 * ids by `<toolu>` and ISO 8601 times by `<time>`.
 */
export function normaliseRunText(text: string, cwd?: string | undefined): string {
  let out = text;
  const dir = cwd?.replace(/\/+$/, "");
  if (dir !== undefined && dir.length > 1) out = out.split(dir).join("<cwd>");
  return out
    .replace(tempDirPattern(), "<tmp>")
    .replace(UUID, "<uuid>")
    .replace(TOOL_USE_ID, "<toolu>")
    .replace(ISO_TIME, "<time>");
}

/** The sha256 (hex) of a tool result's normalised text: what a script's `expect` holds. */
export function toolResultDigest(text: string, cwd?: string | undefined): string {
  return createHash("sha256").update(normaliseRunText(text, cwd)).digest("hex");
}
