// `turnstream doctor` against the real CLI and the scripted model server: a passing and a failing probe.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedServer, type Step } from "../cli/_model.ts";
import { hermeticEnv } from "../cli/_support.ts";

const bin = join(import.meta.dirname, "..", "..", "src", "bin", "turnstream.ts");

async function doctor(script: Step[], args: string[], envOver: Record<string, string | undefined> = {}): Promise<{ code: number | null; out: string; requests: number }> {
  const server = await startScriptedServer(script);
  try {
    const env: Record<string, string | undefined> = { ...process.env, ...hermeticEnv(server.url), XDG_DATA_HOME: mkdtempSync(join(tmpdir(), "ts-doc-data-")), ...envOver };
    for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
    const child = spawn(process.execPath, [bin, "doctor", ...args], { env: env as NodeJS.ProcessEnv, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((r) => child.once("close", r));
    return { code, out, requests: server.requests().length };
  } finally {
    await server.close();
  }
}

test("doctor: all checks pass with a working probe; one line per check", async () => {
  const cwd = join(mkdtempSync(join(tmpdir(), "ts-doc-")), "new", "dir");
  const r = await doctor([{ text: "hello" }], ["--cwd", cwd]);
  const lines = r.out.trim().split("\n");
  assert.deepEqual(lines.slice(0, 6).map((l) => l.split(/\s+/).slice(0, 2).join(" ")), ["pass cli", "pass cwd", "pass auth", "pass contain", "pass sandbox", "pass probe"]);
  // Then a line per run limit: the worker's value and how this host enforces it (root here: v1 cgroups).
  assert.deepEqual(lines.slice(6).map((l) => /^(\w+)\s+limit\s+(\w+):/.exec(l)?.slice(1, 3).join(" ")), ["pass pids", "pass memory", "pass cpu", "pass disk", "pass duration"]);
  assert.match(lines[6]!, /pids: 512 tasks \(TURNSTREAM_MAX_PIDS\); cgroup v[12] pids, a cgroup per run under .*pids\.max/);
  assert.match(lines[0]!, /2\.1\.\d+/);
  assert.match(lines[2]!, /api key/);
  // This host lets root make cgroups: each run gets one, and the line says what that means.
  assert.match(lines[3]!, /^pass\s+contain\s+cgroup-(v2|v1-freezer): each run's CLI starts in a cgroup .* of its own; .*whatever it does to its session/);
  assert.match(lines[4]!, /^pass\s+sandbox\s+bwrap works \(.*bwrap\); untrusted turns run their tools in it/);
  assert.equal(r.code, 0);
  assert.equal(r.requests, 1);
});

test("doctor: without bwrap on PATH the sandbox line fails, naming the install and the opt-out; with the opt-out it warns", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "ts-doc-"));
  const noBwrap = mkdtempSync(join(tmpdir(), "ts-doc-bin-"));
  const json = await doctor([{ text: "hello" }], ["--cwd", cwd, "--json"], { PATH: noBwrap });
  const said = JSON.parse(json.out) as { ok: boolean; checks: Array<{ name: string; status: string; detail: string }> };
  const sandbox = said.checks.find((c) => c.name === "sandbox")!;
  assert.equal(sandbox.status, "fail");
  assert.match(sandbox.detail, /bwrap and socat not found on PATH; install bubblewrap and socat \(Debian\/Ubuntu: apt-get install bubblewrap socat\)/);
  assert.match(sandbox.detail, /TURNSTREAM_TOOL_SANDBOX=off/);
  assert.equal(said.ok, false);
  assert.equal(json.code, 3);
  const optedOut = await doctor([{ text: "hello" }], ["--cwd", cwd, "--json"], { PATH: noBwrap, TURNSTREAM_TOOL_SANDBOX: "off" });
  const out = JSON.parse(optedOut.out) as { ok: boolean; checks: Array<{ name: string; status: string; detail: string }> };
  assert.equal(out.checks.find((c) => c.name === "sandbox")?.status, "warn");
  assert.equal(optedOut.code, 0);
});

test("doctor: a failing probe is a fail line and a non-zero exit; a relative cwd fails too", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "ts-doc-"));
  const r = await doctor([{ error: { status: 500, type: "api_error", message: "boom" } }], ["--cwd", cwd]);
  assert.match(r.out, /^fail\s+probe\s+.*server_error/m);
  assert.equal(r.code, 3, "a machine that is not ready is infrastructure");
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
  const r = await doctor([{ text: "hello" }], ["--cwd", cwd], { TURNSTREAM_MAX_CPUS: "0.5", TURNSTREAM_MAX_MEMORY_MB: "0" });
  assert.match(r.out, /^pass\s+limit\s+cpu: 0\.5 CPUs \(TURNSTREAM_MAX_CPUS\); cgroup v[12] cpu.*throttled/m);
  assert.match(r.out, /^pass\s+limit\s+memory: no limit \(TURNSTREAM_MAX_MEMORY_MB unset or 0\)/m);
  const bad = await doctor([{ text: "hello" }], ["--cwd", cwd], { TURNSTREAM_MAX_PIDS: "lots" });
  assert.match(bad.out, /^fail\s+limit\s+TURNSTREAM_MAX_PIDS must be a whole number/m);
  assert.equal(bad.code, 3);
});

test("doctor: no auth anywhere names `claude auth login`", async () => {
  const r = await doctor([{ text: "hello" }], ["--cwd", mkdtempSync(join(tmpdir(), "ts-doc-"))], { ANTHROPIC_API_KEY: undefined, ANTHROPIC_AUTH_TOKEN: undefined, HOME: mkdtempSync(join(tmpdir(), "ts-doc-home-")) });
  assert.match(r.out, /^fail\s+auth\s+.*claude auth login/m);
  assert.equal(r.code, 3);
});
