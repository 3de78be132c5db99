// Deletes finished runs' folders on a thread of its own. A run's config home holds a few dozen files;
// one native recursive remove needs little CPU, but on a slow disk it blocks for much longer, and
// on the worker's main thread that stalls the next CLI's start and every live turn's appends.
// The async fs.rm keeps the thread free but walks the tree in JavaScript with a thread-pool round trip
// per entry (several times the CPU). So: rmSync, off the main thread, at the lowest priority. The
// thread holds the process open only while it has work; if it cannot run, removal falls back to the
// main thread.
import { rmSync } from "node:fs";
import { Worker } from "node:worker_threads";

type OnError = (err: Error) => void;

// CommonJS source for `eval: true`: the thread needs nothing from this project.
const THREAD = `
const { parentPort } = require("node:worker_threads");
const { rmSync } = require("node:fs");
// Lowest priority for this thread only (Linux nice is per thread): deleting can wait for the CLIs.
try { require("node:os").setPriority(19); } catch {}
parentPort.on("message", (paths) => {
  const failed = [];
  for (const p of paths) {
    try {
      rmSync(p, { recursive: true, force: true });
    } catch (err) {
      failed.push([p, String((err && err.message) || err)]);
    }
  }
  parentPort.postMessage(failed);
});
`;

let thread: Worker | undefined;
let threadBroken = false;
/** Batches sent and not yet answered, oldest first, each with its paths' error handlers. */
const inFlight: Array<Map<string, OnError>> = [];
let batch = new Map<string, OnError>();

function removeHere(paths: Map<string, OnError>): void {
  for (const [path, onError] of paths) {
    try {
      rmSync(path, { recursive: true, force: true });
    } catch (err) {
      onError(err as Error);
    }
  }
}

function startThread(): Worker | undefined {
  if (thread !== undefined || threadBroken) return thread;
  try {
    const t = new Worker(THREAD, { eval: true });
    t.on("message", (failed: Array<[string, string]>) => {
      const done = inFlight.shift();
      for (const [p, message] of failed) done?.get(p)?.(new Error(message));
      if (inFlight.length === 0) t.unref();
    });
    const broken = (): void => {
      threadBroken = true;
      thread = undefined;
      for (const paths of inFlight.splice(0)) removeHere(paths);
    };
    t.on("error", broken);
    t.on("exit", broken);
    thread = t;
  } catch {
    threadBroken = true;
  }
  return thread;
}

function flush(): void {
  const paths = batch;
  batch = new Map();
  const t = startThread();
  if (t === undefined) return removeHere(paths);
  inFlight.push(paths);
  t.ref();
  t.postMessage([...paths.keys()]);
}

/** Deletes `path` (recursively) soon, off the main thread; `onError` hears of a failure. */
export function removeSoon(path: string, onError: OnError): void {
  if (batch.size === 0) setImmediate(flush);
  batch.set(path, onError);
}
