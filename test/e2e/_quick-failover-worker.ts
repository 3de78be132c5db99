// workers/turn-worker.ts with a short session lease, job lock and stalled-job check (the library's
// options; no variable sets them), so a test that kills a worker sees another take its turn over soon.
import { runWorkerMain } from "../../src/worker/main.ts";

runWorkerMain({ workerOptions: { leaseMs: 2000, lockDuration: 2000, stalledInterval: 1000 } }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`quick-failover-worker: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
