// A worker process (configured by the environment, like workers/turn-worker.ts) that dies by SIGKILL
// at one point of parking a turn, for the crash tests of parked turns. TURNSTREAM_TEST_CRASH_AT:
//   turn.parked   the CLI deferred its call and exited; the process dies sending turn.parked's append
//   parked-entry  turn.parked is in the log; it dies sending the pending entry marked parked
// Unset: an ordinary worker. Either way with short locks and leases and the tests' parking timings, so
// the next worker takes a dead one's turn over within seconds.
import { Redis } from "ioredis";
import type { Command } from "ioredis";
import { runWorkerMain } from "../../src/worker/main.ts";

const crashAt = process.env["TURNSTREAM_TEST_CRASH_AT"];
const text = (arg: unknown): string => (Buffer.isBuffer(arg) ? arg.toString("utf8") : String(arg));

function diesAt(command: Command): boolean {
  const args = command.args;
  if (crashAt === "turn.parked")
    return (command.name === "evalsha" || command.name === "eval") && args.some((arg) => text(arg) === "turn.parked");
  if (crashAt === "parked-entry")
    return (
      command.name === "hset" && text(args[0]).endsWith("decisions:pending") && text(args[2]).includes('"parked":{')
    );
  return false;
}

// Every client of the process sends through here: the one that would write the crash point dies first.
const send = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (this: Redis, command: Command, stream?: never) {
  if (diesAt(command)) process.kill(process.pid, "SIGKILL");
  return send.call(this, command, stream);
};

runWorkerMain({
  workerOptions: {
    parking: { answerWindowMs: 300, sweepMs: 500 },
    lockDuration: 4000,
    stalledInterval: 1000,
    leaseMs: 3000,
  },
}).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`crashing worker: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
