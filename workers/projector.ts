#!/usr/bin/env node
// Process entry point of the live projector, run from source. Configuration from the environment:
// REDIS_URL / REDIS_CLUSTER_NODES, TURNSTREAM_PREFIX; it builds the built-in projection version
// (`turnstream projector --version N --rescan-ms MS` builds another). With TURNSTREAM_ARCHIVE it keeps
// each session's summary row in the archive current, and with TURNSTREAM_RETENTION_INTERVAL too it runs
// retention that often. Exits 0 after a clean SIGTERM stop.
import { projectorArchiveWork } from "../src/bin/commands/_archive.ts";
import { runProjectorEntry } from "../src/projector/process.ts";

process.exitCode = await runProjectorEntry({ attach: projectorArchiveWork });
