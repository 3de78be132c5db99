// A consumer's program, run from a project that installed the packed tarball: one real turn through
// the producer, an in-process worker and the real claude CLI, answered by the scripted model server.
// Each side imports its own entry, as an application and a worker process would.
// argv: workspace dir, log prefix, queue prefix. Prints the turn's result as one JSON line.
import { connectRedis, createProducer } from "turnstream/producer";
import { startTurnWorker } from "turnstream/worker";
import { DUMMY_API_KEY, startModelServer } from "turnstream/testing";

const [workspace, logPrefix, queuePrefix] = process.argv.slice(2);
const server = await startModelServer({
  script: { responses: [{ content: [{ type: "text", text: "hello from the consumer" }] }] },
});
const redis = connectRedis();
const worker = startTurnWorker({
  redis,
  workspaceRoots: [workspace],
  instanceRoot: `${workspace}/.turnstream`,
  logPrefix,
  queuePrefix,
  runEnv: {
    ANTHROPIC_BASE_URL: server.url,
    ANTHROPIC_API_KEY: DUMMY_API_KEY,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  },
});
const producer = createProducer({ redis, logPrefix, queuePrefix });
try {
  await worker.ready();
  const { turn } = await producer.enqueueTurn({ prompt: "Say hello.", cwd: workspace });
  const result = await producer.waitForTurn(turn, { timeoutMs: 120_000 });
  process.stdout.write(
    JSON.stringify({ status: result.status, resultText: result.resultText, cliSessionId: result.cliSessionId }) + "\n",
  );
} finally {
  await worker.close({ graceMs: 5000 });
  await producer.queue.obliterate({ force: true });
  await producer.close();
  await server.close();
  redis.disconnect();
}
