// A recording is untrusted input: anyone can edit an exported log and import it. So a re-run takes its
// permissions from the operator's flags alone (the default mode unless they say otherwise) and its cwd
// from the operator alone; a recorded turn that ran with more than the operator grants is refused by
// name, never re-run with the recording's permissions, and an imported session is never re-run with
// more than the default mode (nor one read from the archive, whose word that it was not imported is untrusted).
import { TurnstreamError } from "../kernel/index.ts";
import type { RecordedTurn } from "./record.ts";

/** The permission modes a re-run can be granted (`--permission-mode`); `default` unless the operator says so. */
export const RERUN_PERMISSION_MODES = [
  "default",
  "acceptEdits",
  "plan",
  "dontAsk",
  "auto",
  "bypassPermissions",
] as const;
export type RerunPermissionMode = (typeof RERUN_PERMISSION_MODES)[number];

/** The recording asks for more than the operator granted, or the session is imported and more was granted. */
export class RecordingRefusedError extends TurnstreamError {
  constructor(message: string) {
    super(message, { code: "recording_refused" });
  }
}

export interface RerunGrant {
  /** The permission mode the operator granted (`--permission-mode`). */
  permissionMode: RerunPermissionMode;
  /** The session holds imported events. */
  imported: boolean;
  /**
   * The recording was read from the archive or restored from it: a file or row anyone with access to
   * the store can edit, including the state that says whether it was imported (no digest covers
   * that). Trusted no more than an import.
   */
  archived?: boolean | undefined;
  session: string;
}

/** Why the recorded turns cannot be re-run with what the operator granted, or undefined when they can. */
export function refusalOf(turns: readonly RecordedTurn[], grant: RerunGrant): string | undefined {
  if ((grant.imported || grant.archived === true) && grant.permissionMode !== "default") {
    const why = grant.imported ? "was imported" : "came from the archive";
    return (
      `session ${grant.session} ${why}, so its recording is untrusted: ` +
      `it re-runs only in the default permission mode; drop --permission-mode ${grant.permissionMode}`
    );
  }
  for (const [index, turn] of turns.entries()) {
    const asked = turn.permissionMode ?? "default";
    if (asked === "default" || asked === grant.permissionMode) continue;
    const how = grant.imported
      ? "an imported session re-runs only in the default mode"
      : grant.archived === true
        ? "an archived session re-runs only in the default mode"
        : `pass --permission-mode ${asked} to re-run it so`;
    return (
      `turn ${index + 1} (${turn.turn}) was recorded in permission mode ${JSON.stringify(asked)}, and a re-run never takes ` +
      `its permissions from a recording (it runs in the mode you grant, ${grant.permissionMode}); ${how}, ` +
      "or re-run another turn with --turn"
    );
  }
  return undefined;
}
