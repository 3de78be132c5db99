// `turnstream doctor` against the real CLI and the scripted model server: a passing and a failing probe.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedServer, type Step } from "../runner/_model.ts";
import { hermeticEnv } from "../runner/_support.ts";
import { startModelServer } from "../../src/testing/index.ts";

const bin = join(import.meta.dirname, "..", "..", "src", "bin", "turnstream.ts");

async function doctor(
  script: Step[],
  args: string[],
  envOver: Record<string, string | undefined> = {},
): Promise<{ code: number | null; out: string; requests: number }> {
  const server = await startScriptedServer(script);
  try {
    const env: Record<string, string | undefined> = {
      ...process.env,
      ...hermeticEnv(server.url),
      XDG_DATA_HOME: mkdtempSync(join(tmpdir(), "ts-doc-data-")),
      ...envOver,
    };
    for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
    const child = spawn(process.execPath, [bin, "doctor", ...args], {
      env: env as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((r) => child.once("close", r));
    // Model turns only: the gateway line's count_tokens request is not one.
    return { code, out, requests: server.requests().filter((r) => r.kind !== "count_tokens").length };
  } finally {
    await server.close();
  }
}

test("doctor: all checks pass with a working probe; one line per check", async () => {
  const cwd = join(mkdtempSync(join(tmpdir(), "ts-doc-")), "new", "dir");
  const report = await doctor([{ text: "hello" }], ["--cwd", cwd]);
  const lines = report.out.trim().split("\n");
  assert.deepEqual(
    lines.slice(0, 7).map((l) => l.split(/\s+/).slice(0, 2).join(" ")),
    ["pass cli", "pass cwd", "pass auth", "pass contain", "pass sandbox", "pass probe", "pass gateway"],
  );
  // Then a line per run limit: the worker's value and how this host enforces it (root here: v1 cgroups).
  assert.deepEqual(
    lines.slice(7).map((l) => /^(\w+)\s+limit\s+(\w+):/.exec(l)?.slice(1, 3).join(" ")),
    ["pass pids", "pass memory", "pass cpu", "pass disk", "pass duration"],
  );
  assert.match(
    lines[7]!,
    /pids: 512 tasks \(TURNSTREAM_MAX_PIDS\); cgroup v[12] pids, a cgroup per run under .*pids\.max/,
  );
  assert.match(lines[0]!, /2\.1\.\d+/);
  assert.match(lines[2]!, /api key/);
  // This host lets root make cgroups: each run gets one, and the line says what that means.
  assert.match(
    lines[3]!,
    /^pass\s+contain\s+cgroup-(v2|v1-freezer): each run's CLI starts in a cgroup .* of its own; .*whatever it does to its session/,
  );
  assert.match(lines[4]!, /^pass\s+sandbox\s+bwrap works \(.*bwrap\); untrusted turns run their tools in it/);
  assert.match(
    lines[6]!,
    /^pass\s+gateway\s+brokering on: the gateway holds the api key from ANTHROPIC_API_KEY; runs get a token of their own; .*reached http:\/\/127\.0\.0\.1:\d+ \(status 200\)/,
  );
  assert.equal(report.code, 0);
  assert.equal(report.requests, 1);
});

test("doctor: without bwrap on PATH the sandbox line fails, naming the install and the opt-out; with the opt-out it warns", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "ts-doc-"));
  const noBwrap = mkdtempSync(join(tmpdir(), "ts-doc-bin-"));
  const json = await doctor([{ text: "hello" }], ["--cwd", cwd, "--json"], { PATH: noBwrap });
  const said = JSON.parse(json.out) as { ok: boolean; checks: Array<{ name: string; status: string; detail: string }> };
  const sandbox = said.checks.find((c) => c.name === "sandbox")!;
  assert.equal(sandbox.status, "fail");
  assert.match(
    sandbox.detail,
    /bwrap and socat not found on PATH; install bubblewrap and socat \(Debian\/Ubuntu: apt-get install bubblewrap socat\)/,
  );
  assert.match(sandbox.detail, /TURNSTREAM_TOOL_SANDBOX=off/);
  assert.equal(said.ok, false);
  assert.equal(json.code, 3);
  const optedOut = await doctor([{ text: "hello" }], ["--cwd", cwd, "--json"], {
    PATH: noBwrap,
    TURNSTREAM_TOOL_SANDBOX: "off",
  });
  const out = JSON.parse(optedOut.out) as {
    ok: boolean;
    checks: Array<{ name: string; status: string; detail: string }>;
  };
  assert.equal(out.checks.find((c) => c.name === "sandbox")?.status, "warn");
  assert.equal(optedOut.code, 0);
});

test("doctor: the gateway line shows passthrough as a warning, a refused credential and an unbrokerable provider as failures", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "ts-doc-"));
  const pass = await doctor([{ text: "hello" }], ["--cwd", cwd], { TURNSTREAM_GATEWAY: "passthrough" });
  assert.match(pass.out, /^warn\s+gateway\s+passthrough .*each run holds the worker's credential \(api key\)/m);
  assert.equal(pass.code, 0, "a warning is not a failure");
  const bedrock = await doctor([{ text: "hello" }], ["--cwd", cwd], { CLAUDE_CODE_USE_BEDROCK: "1" });
  assert.match(bedrock.out, /^fail\s+gateway\s+CLAUDE_CODE_USE_BEDROCK is set: .*TURNSTREAM_GATEWAY=passthrough/m);
  // An upstream that takes only another key: the gateway line says the credential was refused, and never prints it.
  const key = `sk-ant-api03-${"k".repeat(40)}`;
  const server = await startModelServer({ script: { responses: [] }, credential: "sk-ant-api03-the-right-one" });
  try {
    const refused = await doctor([{ text: "hello" }], ["--cwd", cwd], {
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: key,
    });
    assert.match(
      refused.out,
      /^fail\s+gateway\s+brokering is on .* refused that credential \(401 authentication_error\)/m,
    );
    assert.equal(refused.out.includes(key), false);
    assert.equal(refused.code, 3);
  } finally {
    await server.close();
  }
});

test("doctor: a failing probe is a fail line and a non-zero exit; a relative cwd fails too", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "ts-doc-"));
  const report = await doctor([{ error: { status: 500, type: "api_error", message: "boom" } }], ["--cwd", cwd]);
  assert.match(report.out, /^fail\s+probe\s+.*server_error/m);
  assert.equal(report.code, 3, "a machine that is not ready is infrastructure");
  const json = await doctor([{ error: { status: 500, type: "api_error", message: "boom" } }], ["--cwd", cwd, "--json"]);
  assert.equal(json.code, 3);
  const said = JSON.parse(json.out) as { ok: boolean; checks: Array<{ name: string; status: string }> };
  assert.equal(said.ok, false);
  assert.equal(said.checks.find((c) => c.name === "probe")?.status, "fail");
  const rel = await doctor([{ text: "hello" }], ["--cwd", "relative/dir"]);
  assert.match(rel.out, /^fail\s+cwd\s+relative\/dir is not an absolute path/m);
  assert.notEqual(rel.code, 0);
  assert.equal(rel.requests, 0);
});

test("doctor: a worker limit from the environment is shown with its enforcement; a malformed one fails by name", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "ts-doc-"));
  const report = await doctor([{ text: "hello" }], ["--cwd", cwd], {
    TURNSTREAM_MAX_CPUS: "0.5",
    TURNSTREAM_MAX_MEMORY_MB: "0",
  });
  assert.match(report.out, /^pass\s+limit\s+cpu: 0\.5 CPUs \(TURNSTREAM_MAX_CPUS\); cgroup v[12] cpu.*throttled/m);
  assert.match(report.out, /^pass\s+limit\s+memory: no limit \(TURNSTREAM_MAX_MEMORY_MB unset or 0\)/m);
  const bad = await doctor([{ text: "hello" }], ["--cwd", cwd], { TURNSTREAM_MAX_PIDS: "lots" });
  assert.match(bad.out, /^fail\s+limit\s+TURNSTREAM_MAX_PIDS must be a whole number/m);
  assert.equal(bad.code, 3);
});

test("doctor: no auth anywhere names `claude auth login`", async () => {
  const report = await doctor([{ text: "hello" }], ["--cwd", mkdtempSync(join(tmpdir(), "ts-doc-"))], {
    ANTHROPIC_API_KEY: undefined,
    ANTHROPIC_AUTH_TOKEN: undefined,
    HOME: mkdtempSync(join(tmpdir(), "ts-doc-home-")),
  });
  assert.match(report.out, /^fail\s+auth\s+.*claude auth login/m);
  assert.equal(report.code, 3);
});
