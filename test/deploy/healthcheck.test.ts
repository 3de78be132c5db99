// `turnstream healthcheck`, the containers' health check (compose runs it; the image has no curl):
// with TURNSTREAM_OPS_PORT it GETs the process's own /readyz (or /healthz with --live) and exits 0
// only on 200, 3 with the reason otherwise; without it, it pings Redis. Probed here against a small
// HTTP server whose answers the test sets, and against the real ops server.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { turnstream } from "../bin/_cli.ts";
import { startOpsServer } from "../../src/ops/index.ts";

interface Seen {
  method: string;
  url: string;
}
const seen: Seen[] = [];
/** What the stand-in answers, per path; a path set to "hang" never answers. */
const answers = new Map<string, { status: number; body: string } | "hang">();
let server: Server;
let port: number;

describe("turnstream healthcheck", () => {
  before(async () => {
    server = createServer((req, res) => {
      seen.push({ method: req.method ?? "", url: req.url ?? "" });
      const answer = answers.get(req.url ?? "");
      if (answer === "hang") return;
      res.writeHead(answer?.status ?? 404, { "content-type": "application/json" }).end(answer?.body ?? "");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  /** A port nothing listens on: bound once, then closed. */
  async function closedPort(): Promise<number> {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const freedPort = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    return freedPort;
  }

  const opsEnv = (opsPort: number, extra: Record<string, string> = {}): Record<string, string> => ({
    TURNSTREAM_OPS_PORT: String(opsPort),
    TURNSTREAM_OPS_HOST: "0.0.0.0",
    ...extra,
  });

  test("ready: a 200 from /readyz exits 0, and the default with an ops port is the readiness probe", async () => {
    answers.set("/readyz", { status: 200, body: '{"status":"ready"}' });
    for (const args of [["healthcheck", "--ready"], ["healthcheck"]]) {
      seen.length = 0;
      const result = await turnstream(args, opsEnv(port), 60_000);
      assert.equal(result.code, 0, `${args.join(" ")}: ${result.stderr}`);
      assert.deepEqual(
        seen,
        [{ method: "GET", url: "/readyz" }],
        "a wildcard bind (0.0.0.0) is asked on loopback, once",
      );
      assert.match(result.stdout, /\/readyz ok/);
    }
  });

  test("not ready: a 503 exits 3 with the status and the server's reason on one line", async () => {
    answers.set("/readyz", { status: 503, body: '{"status":"not_ready",\n"checks":{"redis":"ECONNREFUSED"}}' });
    const result = await turnstream(["healthcheck", "--ready"], opsEnv(port), 60_000);
    assert.equal(result.code, 3, result.stderr);
    const lines = result.stderr.trim().split("\n");
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, /\/readyz answered 503: .*ECONNREFUSED/);
  });

  test("live: --live asks /healthz, and only a 200 counts (a redirect or 500 does not)", async () => {
    answers.set("/healthz", { status: 200, body: "ok" });
    seen.length = 0;
    const ok = await turnstream(["healthcheck", "--live"], opsEnv(port), 60_000);
    assert.equal(ok.code, 0, ok.stderr);
    assert.deepEqual(seen, [{ method: "GET", url: "/healthz" }]);
    for (const status of [500, 302, 204]) {
      answers.set("/healthz", { status, body: "" });
      const result = await turnstream(["healthcheck", "--live"], opsEnv(port), 60_000);
      assert.equal(result.code, 3, `${status}: ${result.stderr}`);
      assert.match(result.stderr, new RegExp(`/healthz answered ${status}`));
    }
  });

  test("nobody listening, or no answer in time: exit 3 with why", async () => {
    const refused = await turnstream(["healthcheck", "--ready"], opsEnv(await closedPort()), 60_000);
    assert.equal(refused.code, 3, refused.stderr);
    assert.match(refused.stderr, /unreachable: ECONNREFUSED/);
    answers.set("/readyz", "hang");
    const started = Date.now();
    const hung = await turnstream(["healthcheck", "--ready", "--timeout-ms", "300"], opsEnv(port), 60_000);
    assert.equal(hung.code, 3, hung.stderr);
    assert.match(hung.stderr, /no answer within 300 ms/);
    assert.ok(Date.now() - started < 30_000);
  });

  test("misconfiguration is a usage error (2), never healthy: --ready without a port, a bad port, both flags", async () => {
    const env = { TURNSTREAM_OPS_PORT: "" };
    const cases: Array<[string[], Record<string, string>, RegExp]> = [
      [["healthcheck", "--ready"], env, /TURNSTREAM_OPS_PORT is not set/],
      [["healthcheck", "--live"], env, /TURNSTREAM_OPS_PORT is not set/],
      [["healthcheck"], { TURNSTREAM_OPS_PORT: "94x64" }, /not a port/],
      [["healthcheck"], { TURNSTREAM_OPS_PORT: "0" }, /not a port/],
      [["healthcheck", "--ready", "--live"], opsEnv(port), /pass one/],
      [["healthcheck", "--timeout-ms", "soon"], opsEnv(port), /--timeout-ms/],
    ];
    for (const [args, caseEnv, message] of cases) {
      const result = await turnstream(args, caseEnv, 60_000);
      assert.equal(result.code, 2, `${args.join(" ")} ${JSON.stringify(caseEnv)}: ${result.stderr}`);
      assert.match(result.stderr, message);
    }
  });

  test("without an ops port it pings Redis: 0 when it answers, 3 when it does not", async () => {
    const up = await turnstream(
      ["healthcheck"],
      { TURNSTREAM_OPS_PORT: "", REDIS_URL: "redis://127.0.0.1:6379" },
      60_000,
    );
    assert.equal(up.code, 0, up.stderr);
    const down = await turnstream(
      ["healthcheck"],
      { TURNSTREAM_OPS_PORT: "", REDIS_URL: `redis://127.0.0.1:${await closedPort()}` },
      60_000,
    );
    assert.equal(down.code, 3, down.stderr);
  });

  test("against the real ops server: ready while its checks pass, 3 once a check fails or it is shutting down", async () => {
    let redisOk: boolean | string = true;
    const ops = await startOpsServer({ port: 0, host: "127.0.0.1", checks: [{ name: "redis", check: () => redisOk }] });
    try {
      const env = { TURNSTREAM_OPS_PORT: String(ops.port), TURNSTREAM_OPS_HOST: "127.0.0.1" };
      assert.equal((await turnstream(["healthcheck", "--ready"], env, 60_000)).code, 0);
      assert.equal((await turnstream(["healthcheck", "--live"], env, 60_000)).code, 0);
      redisOk = "unreachable";
      const notReady = await turnstream(["healthcheck", "--ready"], env, 60_000);
      assert.equal(notReady.code, 3, notReady.stderr);
      assert.match(notReady.stderr, /503.*unreachable/);
      redisOk = true;
      ops.shuttingDown();
      const stopping = await turnstream(["healthcheck"], env, 60_000);
      assert.equal(stopping.code, 3, stopping.stderr);
      assert.match(stopping.stderr, /shutdown/);
      // Shutting down is not dead: liveness still passes, so the orchestrator lets it finish its turns.
      assert.equal((await turnstream(["healthcheck", "--live"], env, 60_000)).code, 0);
    } finally {
      await ops.close();
    }
  });
});
