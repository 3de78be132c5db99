// docker-compose.yml run without Docker: each service built from this repository starts its compose
// command (WORKDIR /app is the repository, dist/ built) with exactly its compose environment, service
// names mapped to loopback (redis → the local Redis, otel-collector → an OTLP receiver) and a temp dir
// standing in for each volume. It must become ready and do its job: the worker runs a turn through
// the real CLI and the scripted model server, the projector projects it, the spans reach the
// "collector", and the health checks pass. A variable the code requires that compose leaves unset
// stops a service here as it would in a container.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse } from "yaml";
import { connectRedis } from "../../src/log/index.ts";
import { readModel } from "../../src/projector/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { startModelServer, type ModelServer } from "../../src/testing/index.ts";
import { ensureBuilt, repoRoot } from "../support/build.ts";
import { startOtlpReceiver, type OtlpReceiver } from "../telemetry/otlp-receiver.ts";

const run = promisify(execFile);
type Service = {
  image?: string;
  command?: string[];
  environment?: Record<string, string | null>;
  volumes?: string[];
  healthcheck?: { test: string[] };
};
const compose = parse(readFileSync(join(repoRoot, "docker-compose.yml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>;
};
/** Services whose image this repository builds (`build: .`): their commands are ours to start. */
const ours = Object.entries(compose.services).filter(([, service]) =>
  String(service.image ?? "").startsWith("turnstream:"),
);

const tag = randomBytes(4).toString("hex");
const work = mkdtempSync(join(tmpdir(), "turnstream-compose-"));
/** Per-test key prefixes on the shared Redis: the only settings the test adds beside the model's. */
const testEnv = { TURNSTREAM_PREFIX: `tscompose${tag}:`, TURNSTREAM_QUEUE_PREFIX: `{tscompose${tag}}` };
let receiver: OtlpReceiver;
/** Ops ports handed to the services, from ports found free in before(). */
const opsPorts: Record<string, number> = {};
const spareOpsPorts: number[] = [];
let model: ModelServer;
const children: ChildProcess[] = [];

/** Compose's `${NAME:-default}` as in a shell that sets none of them. */
const interpolate = (value: string): string => value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1");

/** A compose value with service host names pointed at their loopback stand-ins and volume paths at temp dirs. */
function mapValue(value: string, volumes: Map<string, string>): string {
  let out = interpolate(value)
    .replace(/\/\/redis:6379\b/g, "//127.0.0.1:6379")
    .replace(/\/\/otel-collector:4318\b/g, `//${new URL(receiver.url).host}`);
  for (const [target, dir] of volumes)
    out = out
      .split(":")
      .map((part) => (part === target || part.startsWith(`${target}/`) ? dir + part.slice(target.length) : part))
      .join(":");
  return out;
}

/** The service's container environment on this machine; `extra` is what the test itself provides. */
function serviceEnv(name: string, extra: Record<string, string>, omit: string[] = []): NodeJS.ProcessEnv {
  const svc = compose.services[name]!;
  const volumes = new Map<string, string>();
  for (const volume of svc.volumes ?? []) {
    const [source, target] = volume.split(":") as [string, string];
    const dir = join(work, "volumes", source);
    mkdirSync(dir, { recursive: true });
    volumes.set(target, dir);
  }
  const home = join(work, "home", name);
  mkdirSync(home, { recursive: true });
  const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: home, ...testEnv, ...extra };
  for (const [key, value] of Object.entries(svc.environment ?? {})) {
    // A bare name passes the compose shell's value through; that shell sets none here.
    if (value !== null && !omit.includes(key)) env[key] = mapValue(value, volumes);
  }
  // Each container has its own loopback; here the services share one, so each gets its own free port.
  if (env["TURNSTREAM_OPS_PORT"] !== undefined) {
    opsPorts[name] ??= spareOpsPorts.shift()!;
    env["TURNSTREAM_OPS_PORT"] = String(opsPorts[name]);
    env["TURNSTREAM_OPS_HOST"] = "127.0.0.1";
  }
  return env;
}

/** The compose command with the image's `node` being this repo's. */
function commandOf(name: string): [string, string[]] {
  const [bin, ...args] = compose.services[name]!.command!;
  return [bin === "node" ? process.execPath : bin!, args];
}

/** Starts the service and resolves once it logs `ready` (a pino msg), or rejects with its stderr if it exits first. */
function startService(name: string, env: NodeJS.ProcessEnv, ready: string): Promise<ChildProcess> {
  const [bin, args] = commandOf(name);
  const child = spawn(bin, args, { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let stderr = "";
    let out = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.split("\n").some((l) => l.includes(`"msg":"${ready}"`))) resolve(child);
    });
    child.once("exit", (code) =>
      reject(new Error(`${name} exited ${code} before "${ready}": ${stderr.slice(-2000)}${out.slice(-2000)}`)),
    );
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // Polls Redis state another process writes; there is no event to wait on across processes.
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("docker-compose services run without Docker", () => {
  before(async () => {
    ensureBuilt();
    receiver = await startOtlpReceiver();
    model = await startModelServer({
      script: { responses: [{ content: [{ type: "text", text: "compose says hello" }] }] },
    });
    for (const _ of ours) spareOpsPorts.push(await freePort());
  });

  /** A port nothing listens on now: bound to 0, read, released. */
  async function freePort(): Promise<number> {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    await new Promise((r) => server.close(r));
    return port;
  }

  after(async () => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    await receiver.close();
    await model.close();
    const redis = connectRedis();
    for (const prefix of Object.values(testEnv)) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis.disconnect();
    rmSync(work, { recursive: true, force: true });
  });

  test("compose builds the worker and the projector from this repository", () => {
    assert.deepEqual(ours.map(([name]) => name).sort(), ["projector", "worker"]);
  });

  test("worker and projector start from their compose command and environment: a turn runs, is projected and traced; health checks pass", async () => {
    // The worker's own environment reaches the CLI; the model server stands in for the API.
    const modelEnv = {
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: "sk-ant-compose-dummy-key",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    };
    const workerEnv = serviceEnv("worker", modelEnv);
    const projectorEnv = serviceEnv("projector", {});
    const worker = await startService("worker", workerEnv, "worker ready");
    const projector = await startService("projector", projectorEnv, "projector started");

    for (const [name, env] of [
      ["worker", workerEnv],
      ["projector", projectorEnv],
    ] as const) {
      const [, ...check] = compose.services[name]!.healthcheck!.test;
      const [bin, ...args] = check;
      await run(bin === "node" ? process.execPath : bin!, args, { cwd: repoRoot, env });
    }

    const workspace = join(workerEnv["TURNSTREAM_WORKSPACE_ROOTS"]!.split(":")[0]!, "repo");
    mkdirSync(workspace);
    const redis = connectRedis();
    const producer = createProducer({
      redis,
      logPrefix: testEnv.TURNSTREAM_PREFIX,
      queuePrefix: testEnv.TURNSTREAM_QUEUE_PREFIX,
    });
    try {
      const { session, turn } = await producer.enqueueTurn({ prompt: "Say hello.", cwd: workspace });
      const result = await producer.waitForTurn(turn, { timeoutMs: 120_000 });
      assert.equal(result.status, "finished");
      assert.equal(result.resultText, "compose says hello");
      await waitFor(
        async () =>
          (await readModel(redis, session, { prefix: testEnv.TURNSTREAM_PREFIX }))?.state.view.status === "finished",
        30_000,
        "the projector to project the finished turn",
      );
    } finally {
      await producer.close();
      redis.disconnect();
    }

    worker.kill("SIGTERM");
    projector.kill("SIGTERM");
    assert.equal(await exited(worker), 0);
    assert.equal(await exited(projector), 0);
    // The worker flushes its spans on the way out, to the collector's address in compose.
    const traces = await receiver.waitFor((r) => r.path === "/v1/traces" && r.bodyText.includes("invoke_agent"));
    assert.ok(traces.bodyText.includes("turnstream-worker"), "OTEL_SERVICE_NAME from compose names the spans");
  });

  test("a variable the worker requires and compose would leave unset stops it at start", async () => {
    const [bin, args] = commandOf("worker");
    const env = serviceEnv("worker", {}, ["TURNSTREAM_WORKSPACE_ROOTS"]);
    const result = await run(bin, args, { cwd: repoRoot, env }).then(
      () => ({ code: 0, stderr: "" }),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(result.code, 2);
    assert.match(result.stderr, /TURNSTREAM_WORKSPACE_ROOTS/);
  });
});
