// The tool sandbox, played as an attacker with the real CLI and bubblewrap: a turn whose workspace is
// not trusted runs a Bash call that reaches for a loopback server, writes outside its workspace, reads
// a file of the worker's own, prints the CLI's API key and asks to leave the sandbox; each is refused.
// A trusted turn runs as before; a worker that cannot sandbox refuses untrusted turns unless its
// operator opted out.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { probeToolSandbox } from "../../src/runner/index.ts";
import { InvalidTurnError } from "../../src/queue/index.ts";
import type { Envelope } from "../../src/log/index.ts";
import { rig, type Rig } from "./_more.ts";

interface Target {
  server: Server;
  url: string;
  hits: () => number;
}

/** A loopback HTTP server a tool might reach: it counts every request it gets. */
async function loopbackTarget(): Promise<Target> {
  let hits = 0;
  const server = createServer((_req, res) => {
    hits++;
    res.end("LOOPBACK-PAGE-5521");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${address.port}/`, hits: () => hits };
}

const bash = (command: string, extra: Record<string, unknown> = {}) => ({
  content: [{ type: "tool_use" as const, name: "Bash", input: { command, description: "probe", ...extra } }],
});
const done = { content: [{ type: "text" as const, text: "done" }] };

/** The text of every tool result the CLI printed in a session. */
function toolResults(events: Envelope[]): string {
  return events
    .filter((e) => e.kind === "cli.line" && String((e.data as { raw: string }).raw).includes('"tool_result"'))
    .map((e) => String((e.data as { raw: string }).raw))
    .join("\n");
}

interface Attack {
  target: Target;
  outside: string;
  secret: string;
  inside: string;
  command: string;
}

/** The files and the command of one attack; the secret is planted in the worker's instance root. */
function attack(stage: Rig, target: Target, instanceRoot: string): Attack {
  const outside = join(stage.space.root, "written-outside.txt");
  const secret = join(instanceRoot, "worker-secret.txt");
  mkdirSync(instanceRoot, { recursive: true });
  writeFileSync(secret, "WORKER-SECRET-8812");
  const inside = join(stage.ws, "written-inside.txt");
  const command = `curl -sS -m 5 ${target.url}; echo x > ${outside}; cat ${secret}; echo y > ${inside}`;
  return { target, outside, secret, inside, command };
}

test("untrusted turn: a tool's curl to loopback, a write outside, a read of the worker's files and an unsandboxed retry are refused", async () => {
  assert.ok(probeToolSandbox().ok, "this host can sandbox (bubblewrap and socat installed)");
  const target = await loopbackTarget();
  const stage = await rig((ws: string) => ({
    responses: [
      bash(
        `curl -sS -m 5 ${target.url}; echo x > ${join(ws, "..", "..", "written-outside.txt")}; cat ${join(ws, "..", "..", "inst-sbx", "worker-secret.txt")}; echo y > ${join(ws, "written-inside.txt")}; echo "KEY=[$ANTHROPIC_API_KEY]"; cat ${join(ws, "..", "other", "checkout.txt")}`,
      ),
      bash(`echo again > ${join(ws, "..", "..", "written-outside.txt")}`, { dangerouslyDisableSandbox: true }),
      done,
    ],
  }));
  try {
    const planted = attack(stage, target, join(stage.space.root, "inst-sbx"));
    // Another turn's checkout under the same workspace root.
    writeFileSync(join(stage.space.workspace("other"), "checkout.txt"), "OTHER-CHECKOUT-6604");
    stage.worker({
      instanceRoot: join(stage.space.root, "inst-sbx"),
      workspaceRoots: [join(stage.space.root, "workspaces")],
    });
    const queued = await stage.producer.enqueueTurn({
      prompt: "probe",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 })).status, "finished");
    const results = toolResults(await stage.events(queued.session));
    assert.equal(target.hits(), 0, "the loopback server saw no request");
    assert.equal(existsSync(planted.outside), false, "nothing was written outside the workspace");
    assert.ok(existsSync(planted.inside), "the workspace itself stays writable");
    assert.ok(
      !results.includes("WORKER-SECRET-8812") && results.includes(planted.secret),
      "the worker's file could not be read",
    );
    assert.ok(!results.includes("LOOPBACK-PAGE-5521"));
    assert.ok(results.includes("KEY=[]"), "the CLI's API key is not in the tool's environment");
    assert.ok(!results.includes("OTHER-CHECKOUT-6604"), "another turn's checkout could not be read");
  } finally {
    target.server.close();
    await stage.dispose();
  }
});

test("a trusted workspace's turn runs its tools unsandboxed, as before", async () => {
  const target = await loopbackTarget();
  const stage = await rig((ws: string) => ({
    responses: [
      bash(
        `curl -sS -m 5 ${target.url}; echo x > ${join(ws, "..", "..", "written-outside.txt")}; cat ${join(ws, "..", "..", "inst-sbx", "worker-secret.txt")}; echo "KEY=[$ANTHROPIC_API_KEY]"`,
      ),
      done,
    ],
  }));
  try {
    const planted = attack(stage, target, join(stage.space.root, "inst-sbx"));
    stage.worker({ instanceRoot: join(stage.space.root, "inst-sbx"), workspaceTrust: "job" });
    const queued = await stage.producer.enqueueTurn({
      prompt: "probe",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"], trustWorkspace: true },
    });
    assert.equal((await stage.producer.waitForTurn(queued.turn, { timeoutMs: 120_000 })).status, "finished");
    const results = toolResults(await stage.events(queued.session));
    assert.equal(target.hits(), 1, "the loopback server was reached");
    assert.ok(existsSync(planted.outside), "the write outside happened");
    assert.ok(results.includes("WORKER-SECRET-8812"), "the file was read");
    assert.ok(/KEY=\[(?!\])/.test(results), "the API key is in the tool's environment (scrubbed in the log)");
  } finally {
    target.server.close();
    await stage.dispose();
  }
});

test("a worker that cannot sandbox refuses untrusted turns by name; with TURNSTREAM_TOOL_SANDBOX=off it runs them", async () => {
  const stage = await rig((ws: string) => ({
    responses: [bash(`echo x > ${join(ws, "..", "..", "written-outside.txt")}`), done],
  }));
  // No bwrap on the PATH the runs get: the host cannot sandbox.
  const noBwrap = { PATH: join(stage.space.root, "empty-bin") };
  mkdirSync(noBwrap.PATH);
  const outside = join(stage.space.root, "written-outside.txt");
  try {
    const strict = stage.worker({ runEnv: noBwrap });
    const refused = await stage.producer.enqueueTurn({
      prompt: "probe",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    const end = await stage.producer.waitForTurn(refused.turn, { timeoutMs: 60_000 });
    assert.equal(end.errorKind, "sandbox_unavailable");
    const message = String((end.event.data as { error?: { message?: string } }).error?.message);
    assert.match(message, /bwrap and socat not found on PATH/);
    assert.match(message, /apt-get install bubblewrap socat/);
    assert.match(message, /TURNSTREAM_TOOL_SANDBOX=off/);
    assert.equal(stage.server.requests().filter((q) => q.kind === "messages").length, 0, "the CLI never started");
    await strict.close({ graceMs: 1000 });

    const warnings: string[] = [];
    const logger = {
      debug() {},
      info() {},
      error() {},
      warn: (_fields: unknown, message: string) => void warnings.push(message),
    };
    stage.worker({ runEnv: noBwrap, toolSandbox: { mode: "off" }, logger });
    assert.ok(
      warnings.some((w) => /tool sandbox is OFF/.test(w)),
      "the opt-out is logged when the worker starts",
    );
    const unconfined = await stage.producer.enqueueTurn({
      prompt: "probe",
      cwd: stage.ws,
      options: { allowedTools: ["Bash"] },
    });
    assert.equal((await stage.producer.waitForTurn(unconfined.turn, { timeoutMs: 120_000 })).status, "finished");
    assert.ok(existsSync(outside), "the operator's opt-out ran the tool unconfined");
  } finally {
    await stage.dispose();
  }
});

test("a job may narrow the tool network allow-list, never widen it; its settings file may not touch the sandbox", async () => {
  const stage = await rig({ responses: [done, done] });
  try {
    await assert.rejects(
      stage.producer.enqueueTurn({
        prompt: "hi",
        cwd: stage.ws,
        options: { trustWorkspace: true, sandbox: { allowDomains: ["example.org"] } },
      }),
      (err: unknown) => err instanceof InvalidTurnError && err.field === "options.sandbox",
    );
    await assert.rejects(
      stage.producer.enqueueTurn({
        prompt: "hi",
        cwd: stage.ws,
        options: { sandbox: { allowDomains: ["http://evil.example/"] } },
      }),
      (err: unknown) => err instanceof InvalidTurnError && err.field.startsWith("options.sandbox.allowDomains"),
    );
    stage.worker({ workspaceTrust: "job", toolSandbox: { allowDomains: ["*.example.org"] } });
    const widened = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { sandbox: { allowDomains: ["api.example.org", "evil.example"] } },
    });
    const end = await stage.producer.waitForTurn(widened.turn, { timeoutMs: 60_000 });
    assert.equal(end.errorKind, "bad_options");
    assert.match(
      String((end.event.data as { error?: { message?: string } }).error?.message),
      /options\.sandbox\.allowDomains\.1: evil\.example is not in this worker's/,
    );

    const settingsFile = join(stage.ws, "job-settings.json");
    writeFileSync(settingsFile, JSON.stringify({ sandbox: { enabled: false } }));
    const off = await stage.producer.enqueueTurn({ prompt: "hi", cwd: stage.ws, options: { settingsFile } });
    const offEnd = await stage.producer.waitForTurn(off.turn, { timeoutMs: 60_000 });
    assert.equal(offEnd.errorKind, "bad_options");
    assert.match(
      String((offEnd.event.data as { error?: { message?: string } }).error?.message),
      /settingsFile.*sets "sandbox"/,
    );

    const wideningRules = join(stage.ws, "job-rules.json");
    writeFileSync(wideningRules, JSON.stringify({ permissions: { allow: ["Edit(//etc/**)"] } }));
    const rules = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { settingsFile: wideningRules },
    });
    const rulesEnd = await stage.producer.waitForTurn(rules.turn, { timeoutMs: 60_000 });
    assert.match(
      String((rulesEnd.event.data as { error?: { message?: string } }).error?.message),
      /Edit\(\/\/etc\/\*\*\).*widen the tool sandbox/,
    );

    const narrowed = await stage.producer.enqueueTurn({
      prompt: "hi",
      cwd: stage.ws,
      options: { sandbox: { allowDomains: ["api.example.org"] } },
    });
    assert.equal((await stage.producer.waitForTurn(narrowed.turn, { timeoutMs: 120_000 })).status, "finished");
  } finally {
    await stage.dispose();
  }
});
