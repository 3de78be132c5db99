// The projector process of workers/projector.ts, with the library's options a test needs: small
// commits, so a kill lands mid-rebuild, and a quick rescan, so a new session is found at once.
import { runProjectorEntry } from "../../src/projector/process.ts";

process.exitCode = await runProjectorEntry({ rescanMs: 100, batchEvents: 25 });
