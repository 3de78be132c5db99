// `npm run bench -- decision`: a supervised decision decided by a trust rule, hook → hub → rule → CLI.
//  hub:       the forwarder's HTTP round trip to the hub (request recorded, rules read, decision
//             recorded, reply), i.e. what a decision costs beyond the forwarder's own start-up;
//  forwarder: the forwarder spawned as the hook runs it, against the real hub vs a stub that answers
//             at once (the difference is the hub again, the stub figure is start-up cost);
//  cli:       one real CLI turn with K rule-allowed Bash calls under the hook vs the same turn unhooked.
// Last line: {"bench":"decision","p50Ms","p99Ms",…} with p50/p99 of the hub round trip.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runTurn } from "../src/runner/index.ts";
import {
  FORWARDER_PATH,
  generateOperatorKey,
  operatorKeyFromPem,
  prepareSupervisedRun,
  RuleStore,
  ruleId,
  signRule,
  startDecisionHub,
} from "../src/decisions/index.ts";
import { connectRedis, createEventLog } from "../src/log/index.ts";
import { hermeticEnv, startModelServer } from "../src/testing/index.ts";
import { quantile } from "./_stats.ts";

const N_HUB = Number(process.env["BENCH_N"] ?? 400);
const N_SPAWN = 40;
const STEPS_PER_TURN = 8;

const pct = (xs: number[], percent: number): number => quantile(xs, percent / 100);
const r1 = (x: number): number => Number(x.toFixed(2));

const redis = connectRedis();
const prefix = `bench-dec-${randomBytes(4).toString("hex")}:`;
const log = createEventLog({ redis, prefix });
const session = `bench-${randomBytes(4).toString("hex")}`;
const { epoch, attempt } = await log.beginAttempt(session, "t1");
// The rule counts only when signed by a key the hub trusts: each request verifies it (no cache).
const operator = generateOperatorKey();
const hub = await startDecisionHub({ log, redis, prefix, operatorKeys: [operator.publicKey] });
const rule = {
  id: ruleId("allow", "Bash(echo *)"),
  pattern: "Bash(echo *)",
  effect: "allow" as const,
  by: "bench",
  at: new Date().toISOString(),
};
await new RuleStore(redis, prefix).put(signRule(operatorKeyFromPem(operator.privateKeyPem), rule));
const dir = mkdtempSync(join(tmpdir(), "bench-decision-"));
const run = prepareSupervisedRun(hub, { session, turn: "t1", attempt, epoch, cwd: dir, tmpDir: dir });
const { token } = JSON.parse(readFileSync(run.runFile, "utf8")) as { token: string };
const input = (index: number): string =>
  JSON.stringify({
    hook_event_name: "PreToolUse",
    session_id: "bench",
    tool_name: "Bash",
    tool_input: { command: `echo ${index}` },
    tool_use_id: `toolu_${index}`,
  });

function post(url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const nonce = randomBytes(16).toString("hex");
    const req = request(
      new URL("/v1/hook", url),
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "x-turnstream-nonce": nonce,
          "content-length": Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

// 1. Hub round trips (after a short priming run).
for (let priming = 0; priming < 20; priming++) await post(hub.url, input(priming));
const hubMs: number[] = [];
for (let index = 0; index < N_HUB; index++) {
  const startedAt = performance.now();
  const response = await post(hub.url, input(index));
  hubMs.push(performance.now() - startedAt);
  if (response.status !== 200 || !response.text.includes('"allow"'))
    throw new Error(`unexpected hub answer ${response.status}`);
}

// 2. The forwarder spawned as the hook runs it: real hub vs an instant stub.
const stub = createServer((req, res) => {
  req.resume();
  req.on("end", () =>
    res.end(JSON.stringify({ decision: "allow", reason: "stub", nonce: req.headers["x-turnstream-nonce"] })),
  );
});
await new Promise<void>((r) => stub.listen(0, "127.0.0.1", () => r()));
const stubFile = join(dir, "stub-run.json");
writeFileSync(
  stubFile,
  JSON.stringify({
    ...JSON.parse(readFileSync(run.runFile, "utf8")),
    url: `http://127.0.0.1:${(stub.address() as AddressInfo).port}`,
  }),
  { mode: 0o600 },
);
function forward(file: string, index: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const child = spawn(process.execPath, [FORWARDER_PATH, file], { stdio: ["pipe", "pipe", "ignore"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (x: string) => (out += x));
    child.on("close", () =>
      out.includes('"allow"') ? resolve(performance.now() - startedAt) : reject(new Error(`forwarder said ${out}`)),
    );
    child.stdin.end(input(index));
  });
}
const fullMs: number[] = [];
const stubMs: number[] = [];
for (let index = 0; index < N_SPAWN; index++) {
  if (index % 2 === 0) {
    fullMs.push(await forward(run.runFile, index));
    stubMs.push(await forward(stubFile, index));
  } else {
    stubMs.push(await forward(stubFile, index));
    fullMs.push(await forward(run.runFile, index));
  }
}
stub.close();

// 3. Real CLI: K rule-allowed Bash calls per turn, hooked vs not.
const steps = Array.from({ length: STEPS_PER_TURN }, (_, step) => ({
  content: [{ type: "tool_use" as const, name: "Bash", input: { command: `echo step-${step}` } }],
}));
async function cliTurn(hooked: boolean): Promise<number> {
  const server = await startModelServer({
    script: { responses: [...steps, { content: [{ type: "text", text: "done" }] }] },
  });
  const hermetic = hermeticEnv({ baseUrl: server.url });
  try {
    const startedAt = performance.now();
    const handle = runTurn({
      cwd: dir,
      prompt: "go",
      env: hermetic.env,
      ...(hooked ? run.turnOptions : { permissionMode: "default" as const }),
    });
    for await (const _ of handle.lines) void _;
    const outcome = await handle.outcome;
    if ((outcome.result["permission_denials"] as unknown[]).length > 0) throw new Error("a call was denied");
    return performance.now() - startedAt;
  } finally {
    await server.close();
    hermetic.cleanup();
  }
}
const hooked: number[] = [];
const plain: number[] = [];
for (let round = 0; round < 2; round++) {
  plain.push(await cliTurn(false));
  hooked.push(await cliTurn(true));
}
const perCallMs = (Math.min(...hooked) - Math.min(...plain)) / STEPS_PER_TURN;

run.close();
await hub.close();
await log.destroy(session);
const keys = await redis.keys(`${prefix}*`);
if (keys.length > 0) await redis.del(...keys);
redis.disconnect();
rmSync(dir, { recursive: true, force: true });

const out = {
  bench: "decision",
  p50Ms: r1(pct(hubMs, 50)),
  p99Ms: r1(pct(hubMs, 99)),
  hubRequests: N_HUB,
  goalP99Ms: 50,
  forwarderP50Ms: r1(pct(fullMs, 50)),
  forwarderP99Ms: r1(pct(fullMs, 99)),
  forwarderStartupP50Ms: r1(pct(stubMs, 50)),
  forwarderStartupP99Ms: r1(pct(stubMs, 99)),
  forwarderBeyondStartupP50Ms: r1(pct(fullMs, 50) - pct(stubMs, 50)),
  spawns: N_SPAWN,
  cliPerCallOverheadMs: r1(perCallMs),
  cliCallsPerTurn: STEPS_PER_TURN,
};
process.stdout.write(`hub round trip: p50 ${out.p50Ms} ms, p99 ${out.p99Ms} ms over ${N_HUB}\n`);
process.stdout.write(
  `forwarder spawn: p50 ${out.forwarderP50Ms} ms (stub ${out.forwarderStartupP50Ms} ms), p99 ${out.forwarderP99Ms} ms (stub ${out.forwarderStartupP99Ms} ms)\n`,
);
process.stdout.write(
  `real CLI: ${out.cliPerCallOverheadMs} ms per hooked call (turns hooked ${hooked.map((x) => x.toFixed(0)).join("/")} ms, plain ${plain.map((x) => x.toFixed(0)).join("/")} ms)\n`,
);
process.stdout.write(JSON.stringify(out) + "\n");
