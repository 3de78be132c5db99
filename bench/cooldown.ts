// What the fleet cooldown costs a request when no credential is cooling: the same Messages requests
// through three gateways in front of the scripted model server, taking turns: one with no policy, one
// with the cooldown asking Redis on every request (clearCacheMs 0), one with the default 100 ms "no
// cooldown" cache. Figures: time to the answer's first byte added at p50 and p95 against no policy,
// and Redis script calls per request (from the server's command stats). `--url redis://…` measures a
// Redis of yours (a remote one shows the round trip a fleet pays); by default a private redis-server
// on loopback. `--requests N` per way (default 600); `--gap-ms MS` between rounds (default 0: a burst;
// a CLI's calls come seconds apart, where the cache rarely holds).
import { parseArgs } from "node:util";
import { credentialFrom, FleetCooldown, startGateway, type ModelGateway, type RunGrant } from "../src/gateway/index.ts";
import { startModelServer } from "../src/testing/index.ts";
import { benchRedis } from "./_redis.ts";
import { quantile } from "./_stats.ts";

const { values } = parseArgs({
  options: { url: { type: "string" }, requests: { type: "string" }, "gap-ms": { type: "string" } },
});
const REQUESTS = Number(values.requests ?? 600);
const GAP_MS = Number(values["gap-ms"] ?? 0);
const KEY = "sk-ant-api03-bench-cooldown-000000000000000000000000";
const PREFIX = "bench-cooldown:";

const redis = await benchRedis(values.url);
const server = await startModelServer({ script: { responses: [] } });
const credential = credentialFrom({ ANTHROPIC_API_KEY: KEY }, undefined)!;
const body = JSON.stringify({
  model: "claude-sonnet-4-5",
  max_tokens: 16,
  system: "s".repeat(24_000),
  messages: [{ role: "user", content: "say done" }],
});

type Way = "none" | "uncached" | "cached";
const ways: Record<Way, { gateway: ModelGateway; grant: RunGrant }> = {} as never;
const policies: Record<Way, FleetCooldown | undefined> = {
  none: undefined,
  uncached: new FleetCooldown({ redis: redis.redis, prefix: PREFIX, clearCacheMs: 0 }),
  cached: new FleetCooldown({ redis: redis.redis, prefix: PREFIX }),
};
for (const way of Object.keys(policies) as Way[]) {
  const gateway = await startGateway({ policy: policies[way] });
  ways[way] = {
    gateway,
    grant: gateway.issue({ baseUrl: new URL(server.url), credential }, { binding: { session: way }, onCall: () => {} }),
  };
}

async function firstByteMs(way: Way): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(`${ways[way].gateway.url}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": ways[way].grant.token, "content-type": "application/json" },
    body,
  });
  const reader = res.body!.getReader();
  const first = performance.now() - t0;
  while (!(await reader.read()).done);
  if (res.status !== 200) throw new Error(`${way}: ${res.status}`);
  return first;
}

async function scriptCalls(): Promise<number> {
  const info = await redis.redis.info("commandstats");
  const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  return calls("evalsha") + calls("eval");
}

// Priming (JIT, connections, script loading) is not counted.
for (let round = 0; round < 50; round++) for (const way of Object.keys(ways) as Way[]) await firstByteMs(way);
const times: Record<Way, number[]> = { none: [], uncached: [], cached: [] };
const reads: Record<Way, number> = { none: 0, uncached: 0, cached: 0 };
const order: Way[][] = [
  ["none", "uncached", "cached"],
  ["cached", "none", "uncached"],
  ["uncached", "cached", "none"],
];
for (let round = 0; round < REQUESTS; round++) {
  for (const way of order[round % 3]!) {
    const before = values.url === undefined ? await scriptCalls() : 0;
    times[way].push(await firstByteMs(way));
    if (values.url === undefined) reads[way] += (await scriptCalls()) - before;
  }
  if (GAP_MS > 0) await new Promise((resolve) => setTimeout(resolve, GAP_MS));
}
for (const way of Object.keys(ways) as Way[]) await ways[way].gateway.close();
await server.close();
await redis.close();

const r2 = (n: number): number => Number(n.toFixed(3));
const added = (way: Way, fraction: number): number =>
  r2(quantile(times[way], fraction) - quantile(times.none, fraction));
for (const way of Object.keys(ways) as Way[]) {
  process.stdout.write(
    `${way.padEnd(9)} ttfb p50 ${quantile(times[way], 0.5).toFixed(3)} ms, p95 ${quantile(times[way], 0.95).toFixed(3)} ms` +
      (values.url === undefined ? `, Redis script calls per request ${(reads[way] / REQUESTS).toFixed(3)}` : "") +
      "\n",
  );
}
process.stdout.write(
  JSON.stringify({
    bench: "cooldown",
    uncachedAddedP50Ms: added("uncached", 0.5),
    uncachedAddedP95Ms: added("uncached", 0.95),
    cachedAddedP50Ms: added("cached", 0.5),
    cachedAddedP95Ms: added("cached", 0.95),
    readsPerRequestUncached: values.url === undefined ? r2(reads.uncached / REQUESTS) : null,
    readsPerRequestCached: values.url === undefined ? r2(reads.cached / REQUESTS) : null,
    requests: REQUESTS,
    gapMs: GAP_MS,
  }) + "\n",
);
