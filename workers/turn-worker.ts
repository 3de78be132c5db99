// Process entry: a turn worker configured by the environment (REDIS_URL / REDIS_CLUSTER_NODES,
// TURNSTREAM_WORKSPACE_ROOTS, TURNSTREAM_CONCURRENCY, ANTHROPIC_* passed through to the CLI).
import { runWorkerMain } from "../src/worker/main.ts";

runWorkerMain().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`turn-worker: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
