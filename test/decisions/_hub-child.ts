// A stand-in worker process for the abandoned-request test: starts a hub with a 100 ms heartbeat,
// prepares one supervised run, prints the run file's path, then waits to be killed. Trusts the
// operator key given as the last argument.
import { connectRedis, createEventLog } from "../../src/log/index.ts";
import { prepareSupervisedRun, startDecisionHub } from "../../src/decisions/index.ts";

const [prefix, session, turn, attempt, epoch, dir, publicKey] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string,
];
const redis = connectRedis();
const log = createEventLog({ redis, prefix });
const hub = await startDecisionHub({ log, redis, prefix, heartbeatMs: 100, operatorKeys: [publicKey] });
const run = prepareSupervisedRun(hub, { session, turn, attempt: Number(attempt), epoch: Number(epoch), tmpDir: dir });
process.stdout.write(run.runFile + "\n");
setInterval(() => {}, 60_000);
