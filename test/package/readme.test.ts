// README.md cannot rot: every TypeScript block (and the CI guide's) is type-checked against the built
// package (an `import … from "turnstream"` resolves to dist/ as it would for a user) and run against a
// private Redis, a turn worker and the scripted model server; every ```sh command line is run, or is
// one that CI runs itself; the offline walkthrough runs as the one script it is; the GitHub Actions
// workflow's step runs as a runner would run it, against a fleet; no other fenced block holds a
// command. In the README and the guides (docs/guides/), every `turnstream …` command the prose names
// exists and takes the flags it shows, every `npm run` script exists, and every repository path and
// link leads somewhere. The generated configuration
// reference lists exactly the variables of src/telemetry/env-vars.ts, which holds every TURNSTREAM_*
// variable the code names.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse as parseYaml } from "yaml";
import { ENV_VAR_NAMES } from "../../src/telemetry/env-vars.ts";
import { hermeticEnv, startModelServer } from "../../src/testing/index.ts";
import { ensureBuilt, repoRoot } from "../support/build.ts";
import { startRedisServer, type RedisServer } from "../support/redis-server.ts";

const run = promisify(execFile);
const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
const guidesDir = join(repoRoot, "docs", "guides");
/** The README and the guides, each as [repository path, text]. */
const userDocs: [string, string][] = [
  ["README.md", readme],
  ...readdirSync(guidesDir)
    .filter((f) => f.endsWith(".md"))
    .map((f): [string, string] => [join("docs", "guides", f), readFileSync(join(guidesDir, f), "utf8")]),
];
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> };
const bin = join(repoRoot, "dist", "bin", "turnstream.js");
const work = mkdtempSync(join(tmpdir(), "turnstream-readme-"));
const project = join(work, "project");
const workspace = join(work, "workspace");
let redis: RedisServer;

interface Block {
  lang: string;
  body: string;
  /** 1-based line of the opening fence. */
  line: number;
}

function fencedBlocks(markdown: string): Block[] {
  const out: Block[] = [];
  const re = /^```(\w*)\n([\s\S]*?)^```$/gm;
  for (const match of markdown.matchAll(re))
    out.push({ lang: match[1]!, body: match[2]!, line: markdown.slice(0, match.index).split("\n").length });
  return out;
}

const tsBlocks = fencedBlocks(readme).filter((b) => b.lang === "ts");
const blockFile = (b: Block): string => join(project, `readme-line-${b.line}.ts`);
/** The CI guide's code, which a user pastes as they would the README's. */
const ciGuide = readFileSync(join(guidesDir, "ci.md"), "utf8");
const ciTsBlocks = fencedBlocks(ciGuide).filter((b) => b.lang === "ts");
const ciBlockFile = (b: Block): string => join(project, `ci-guide-line-${b.line}.ts`);
/** The README's offline walkthrough: one sh block, run as the script it is (background jobs and all). */
const isOfflineWalkthrough = (b: Block): boolean => b.lang === "sh" && b.body.startsWith("# offline:");
/** A directory with a `turnstream` on it, as `npm install --global turnstream` gives a user. */
const shimDir = join(work, "bin");

/** A user's environment: this repo's Node first on PATH, the private Redis, nothing of npm's. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!/^(npm_|ANTHROPIC_|OTEL_|TURNSTREAM_|REDIS_)/i.test(name)) env[name] = value;
  return {
    ...env,
    PATH: `${join(repoRoot, "node_modules", ".bin")}:${process.env["PATH"] ?? ""}`,
    REDIS_URL: redis.url,
    ...extra,
  };
}

/** Starts the built `turnstream` command and resolves once it logs `ready`. */
function startCommand(args: string[], env: NodeJS.ProcessEnv, ready: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [bin, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes(`"msg":"${ready}"`)) resolve(child);
    });
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    child.once("exit", (code) => reject(new Error(`turnstream ${args.join(" ")} exited ${code}: ${out.slice(-2000)}`)));
  });
}

const stopped = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) =>
    child.exitCode !== null ? resolve() : (child.once("exit", () => resolve()), child.kill("SIGTERM")),
  );

describe("the README and guides run as written", () => {
  before(async () => {
    ensureBuilt();
    redis = await startRedisServer();
    mkdirSync(join(project, "node_modules"), { recursive: true });
    mkdirSync(workspace);
    // The package as a dependency: resolving through the link lands in dist/ via package.json exports.
    symlinkSync(repoRoot, join(project, "node_modules", "turnstream"));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "readme", private: true, type: "module" }));
    for (const block of tsBlocks) writeFileSync(blockFile(block), block.body);
    for (const block of ciTsBlocks) writeFileSync(ciBlockFile(block), block.body);
    mkdirSync(shimDir);
    writeFileSync(join(shimDir, "turnstream"), `#!/bin/sh\nexec "${process.execPath}" "${bin}" "$@"\n`, {
      mode: 0o755,
    });
  });

  after(async () => {
    await redis.dispose();
    rmSync(work, { recursive: true, force: true });
  });

  test("README has TypeScript examples and each imports the package by its published name", () => {
    assert.ok(tsBlocks.length >= 2);
    for (const block of tsBlocks) assert.match(block.body, /from "turnstream(\/\w+)?"/, `block at line ${block.line}`);
  });

  test("every TypeScript block of the README and the CI guide type-checks against the built declarations", async () => {
    assert.ok(ciTsBlocks.length >= 1);
    const tsconfig = {
      compilerOptions: {
        target: "es2024",
        module: "nodenext",
        moduleResolution: "nodenext",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        allowImportingTsExtensions: true,
        types: ["node"],
        typeRoots: [join(repoRoot, "node_modules", "@types")],
      },
      files: [...tsBlocks.map(blockFile), ...ciTsBlocks.map(ciBlockFile)],
    };
    writeFileSync(join(project, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
    const result = await run(join(repoRoot, "node_modules", ".bin", "tsc"), ["-p", join(project, "tsconfig.json")], {
      cwd: project,
    }).catch((err: { stdout: string }) => err);
    assert.equal("stdout" in result ? result.stdout : "", "");
  });

  test("the producer example runs: a worker takes its turn and it finishes", async () => {
    const block = tsBlocks.find((b) => b.body.includes("createProducer"))!;
    const model = await startModelServer({
      script: { responses: [{ content: [{ type: "text", text: "api: a small service" }] }] },
    });
    const hermetic = hermeticEnv({ baseUrl: model.url, root: join(work, "worker-home") });
    // A fleet as the quick start finds it: no GITHUB_TOKEN or other extra anywhere.
    const worker = await startCommand(
      ["worker"],
      userEnv({ ...hermetic.env, TURNSTREAM_WORKSPACE_ROOTS: workspace }),
      "worker ready",
    );
    try {
      const { stdout } = await run(process.execPath, [blockFile(block)], {
        cwd: workspace,
        env: userEnv(),
        timeout: 120_000,
      });
      assert.match(stdout, /finished api: a small service/);
      assert.match(stdout, /turn\.finished/);
    } finally {
      await stopped(worker);
      await model.close();
    }
  });

  test("the producer example prints the failed turn's error kind and message, and exits 1", async () => {
    const block = tsBlocks.find((b) => b.body.includes("createProducer"))!;
    // The worker allows another workspace, so it fails the example's turn (its cwd) before any CLI starts.
    const elsewhere = join(work, "another-workspace");
    mkdirSync(elsewhere, { recursive: true });
    const hermetic = hermeticEnv({ baseUrl: "http://127.0.0.1:9", root: join(work, "worker-home-refusing") });
    const worker = await startCommand(
      ["worker"],
      userEnv({ ...hermetic.env, TURNSTREAM_WORKSPACE_ROOTS: elsewhere }),
      "worker ready",
    );
    try {
      const failed = await run(process.execPath, [blockFile(block)], {
        cwd: workspace,
        env: userEnv(),
        timeout: 120_000,
      }).then(
        (ok) => assert.fail(`the example exited 0 for a failed turn: ${ok.stdout}${ok.stderr}`),
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
      assert.equal(failed.code, 1, failed.stderr);
      assert.match(failed.stdout, /turn\.failed/);
      assert.match(failed.stderr, /^turn failed: workspace_not_allowed: \S/m);
      assert.doesNotMatch(failed.stderr, /undefined/);
    } finally {
      await stopped(worker);
    }
  });

  test("the CI guide's producer example runs as pasted (no GITHUB_TOKEN) and says why a turn did not finish", async () => {
    const block = ciTsBlocks.find((b) => b.body.includes("createProducer"))!;
    const model = await startModelServer({
      script: { responses: [{ content: [{ type: "text", text: "api: the summary" }] }] },
    });
    const hermetic = hermeticEnv({ baseUrl: model.url, root: join(work, "ci-guide-home") });
    const worker = await startCommand(
      ["worker"],
      userEnv({ ...hermetic.env, TURNSTREAM_WORKSPACE_ROOTS: workspace }),
      "worker ready",
    );
    try {
      const { stdout } = await run(process.execPath, [ciBlockFile(block)], {
        cwd: workspace,
        env: userEnv(),
        timeout: 120_000,
      });
      assert.match(stdout, /^s-\S+ api: the summary$/m);
    } finally {
      await stopped(worker);
      await model.close();
    }
    // A turn the fleet refuses (no worker allows its cwd), under another idempotency key: the reason, no `undefined`.
    const elsewhere = join(work, "ci-guide-elsewhere");
    mkdirSync(elsewhere, { recursive: true });
    const refusing = await startCommand(
      ["worker"],
      userEnv({
        ...hermeticEnv({ baseUrl: "http://127.0.0.1:9", root: join(work, "ci-guide-refusing") }).env,
        TURNSTREAM_WORKSPACE_ROOTS: elsewhere,
      }),
      "worker ready",
    );
    try {
      const file = join(project, "ci-guide-refused.ts");
      writeFileSync(file, block.body.replace("nightly-2026-12-02", "nightly-refused"));
      const failed = await run(process.execPath, [file], { cwd: workspace, env: userEnv(), timeout: 120_000 }).then(
        (ok) => assert.fail(`exited 0 for a failed turn: ${ok.stdout}`),
        (err: { code: number; stderr: string }) => err,
      );
      assert.equal(failed.code, 1, failed.stderr);
      assert.match(failed.stderr, /^s-\S+: turn failed: workspace_not_allowed: \S/m);
      assert.doesNotMatch(failed.stderr, /undefined/);
    } finally {
      await stopped(refusing);
    }
  });

  test("the runTurn example runs against the scripted model server", async () => {
    const block = tsBlocks.find((b) => b.body.includes("runTurn("))!;
    const model = await startModelServer({
      script: { responses: [{ content: [{ type: "text", text: "the test passes now" }] }] },
    });
    const hermetic = hermeticEnv({ baseUrl: model.url, root: join(work, "runturn-home") });
    try {
      const { stdout } = await run(process.execPath, [blockFile(block)], {
        cwd: workspace,
        env: userEnv(hermetic.env),
        timeout: 120_000,
      });
      assert.match(stdout, /^system\/init$/m);
      assert.match(stdout, /^result\/success$/m);
      assert.match(stdout, /^the test passes now$/m);
    } finally {
      await model.close();
    }
  });

  test("the runTurn example prints why a run failed, and exits 1", async () => {
    const block = tsBlocks.find((b) => b.body.includes("runTurn("))!;
    const missing = join(work, "no-such-claude");
    const failed = await run(process.execPath, [blockFile(block)], {
      cwd: workspace,
      env: userEnv({ CLAUDE_BIN: missing }),
      timeout: 120_000,
    }).then(
      (ok) => assert.fail(`the example exited 0 for a failed run: ${ok.stdout}${ok.stderr}`),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stderr, /^the turn failed: claude CLI not found \(tried .*no-such-claude/m);
  });

  /** Command lines CI runs itself (.ci/run), or another test runs as a user would. */
  const RUN_ELSEWHERE: Record<string, () => void> = {
    "npm ci": () => assert.match(readFileSync(join(repoRoot, ".ci", "run"), "utf8"), /^npm ci\b/m),
    "npm test": () => assert.match(readFileSync(join(repoRoot, ".ci", "run"), "utf8"), /^npm test$/m),
    "npm install turnstream": () =>
      assert.match(readFileSync(join(repoRoot, "test", "package", "consumer.test.ts"), "utf8"), /"install",\s+tarball/),
  };

  test("the offline walkthrough runs as pasted: a scripted model, a worker on it, a turn that finishes", async () => {
    const block = fencedBlocks(readme).find(isOfflineWalkthrough);
    assert.ok(block, "README has the offline walkthrough");
    const dir = join(work, "offline");
    mkdirSync(dir);
    const script = join(work, "offline.sh");
    writeFileSync(script, block.body);
    // A user's shell: turnstream on PATH, a private Redis, and the worker's instance folder under this test.
    const env = userEnv({ PATH: `${shimDir}:${userEnv().PATH}`, XDG_DATA_HOME: join(work, "offline-data") });
    const { stdout, stderr } = await run("bash", ["-e", script], { cwd: dir, env, timeout: 180_000 });
    assert.match(stdout, /^listening on http:\/\/127\.0\.0\.1:4599$/m, stderr);
    assert.match(stdout, /^result \(finished\): Hello from the scripted model\.$/m, stderr);
    assert.match(readFileSync(join(dir, "worker.log"), "utf8"), /"msg":"worker stopped"/, "`wait` let the worker stop");
  });

  /** The `${{ secrets.NAME }}` expressions of a workflow, as the test's fleet fills them in. */
  function withSecrets(text: string, secrets: Record<string, string>): string {
    return text.replace(/\$\{\{\s*secrets\.([A-Z_]+)\s*\}\}/g, (_, name: string) => {
      assert.ok(name in secrets, `the workflow names secrets.${name}`);
      return secrets[name]!;
    });
  }

  interface WorkflowStep {
    name?: string;
    uses?: string;
    run?: string;
    env?: Record<string, string>;
  }

  test("the GitHub Actions workflow's turnstream step runs as a runner runs it, against a fleet, and exits 0", async () => {
    const workflows = fencedBlocks(readme).filter((b) => b.lang === "yaml");
    assert.equal(workflows.length, 1);
    const workflow = parseYaml(workflows[0]!.body) as { jobs: Record<string, { steps: WorkflowStep[] }> };
    const steps = Object.values(workflow.jobs).flatMap((job) => job.steps);
    assert.ok(steps.every((step) => step.uses?.startsWith("actions/") || step.run !== undefined));
    const turnSteps = steps.filter((step) => step.run?.includes("turnstream run"));
    assert.equal(turnSteps.length, 1);
    const model = await startModelServer({
      script: { responses: [{ content: [{ type: "text", text: "nothing breaks" }] }] },
    });
    const checkout = join(work, "checkout");
    mkdirSync(checkout);
    const hermetic = hermeticEnv({ baseUrl: model.url, root: join(work, "workflow-worker-home") });
    const worker = await startCommand(
      ["worker"],
      userEnv({ ...hermetic.env, TURNSTREAM_WORKSPACE_ROOTS: checkout }),
      "worker ready",
    );
    try {
      const step = turnSteps[0]!;
      const stepEnv = Object.fromEntries(
        Object.entries(step.env ?? {}).map(([name, value]) => [
          name,
          withSecrets(value, { TURNSTREAM_REDIS_URL: redis.url }),
        ]),
      );
      const script = join(work, "workflow-step.sh");
      writeFileSync(script, step.run!);
      const runnerTemp = join(work, "runner-temp");
      mkdirSync(runnerTemp);
      // GitHub's default shell for `run` on Linux, in the checkout.
      const env = userEnv({
        PATH: `${shimDir}:${userEnv().PATH}`,
        GITHUB_WORKSPACE: checkout,
        RUNNER_TEMP: runnerTemp,
        REDIS_URL: "redis://127.0.0.1:1", // the step's own env must be what points it at the fleet
        ...stepEnv,
      });
      await run("bash", ["--noprofile", "--norc", "-eo", "pipefail", script], { cwd: checkout, env, timeout: 180_000 });
      const said = JSON.parse(readFileSync(join(checkout, "turn.json"), "utf8")) as Record<string, unknown>;
      assert.deepEqual([said["outcome"], said["exitCode"], said["resultText"]], ["finished", 0, "nothing breaks"]);
      assert.equal(typeof said["costUsd"], "number");
    } finally {
      await stopped(worker);
      await model.close();
    }
  });

  test("every command line in a sh block runs (or is run by CI or the consumer test)", async () => {
    const lines = fencedBlocks(readme)
      .filter((b) => b.lang === "sh" && !isOfflineWalkthrough(b))
      .flatMap((b) => b.body.split("\n"))
      .flatMap((l) => l.replace(/#.*$/, "").split("&&"))
      .map((c) => c.trim())
      .filter((c) => c !== "");
    assert.ok(lines.includes("npm run demo"));
    for (const command of new Set(lines)) {
      const elsewhere = RUN_ELSEWHERE[command];
      if (elsewhere !== undefined) {
        elsewhere();
        continue;
      }
      const [exe, ...args] = command.split(/\s+/);
      const { stdout } = await run(exe!, args, { cwd: repoRoot, env: userEnv(), timeout: 240_000 });
      if (command === "npm run demo") assert.match(stdout, /turn 2 resumed turn 1/);
    }
  });

  test("every `turnstream …` command the README and the guides name exists and takes the flags it shows", async () => {
    const spans = userDocs.flatMap(([, text]) => [...text.matchAll(/`(?:npx )?turnstream ([a-z-]+)([^`]*)`/g)]);
    assert.ok(spans.length >= 10);
    const helps = new Map<string, Promise<string>>();
    const helpOf = (cmd: string): Promise<string> => {
      if (!helps.has(cmd)) {
        const args = cmd.startsWith("-") ? [cmd] : [cmd, "--help"];
        helps.set(
          cmd,
          run(process.execPath, [bin, ...args], { env: userEnv() }).then((r) => r.stdout + r.stderr),
        );
      }
      return helps.get(cmd)!;
    };
    for (const [span, cmd, rest] of spans) {
      const help = await helpOf(cmd!);
      for (const flag of rest!.match(/--[a-z][a-z-]*/g) ?? [])
        assert.ok(help.includes(flag), `${span}: turnstream ${cmd} has no ${flag}`);
    }
  });

  test("every `npm run …` the README and the guides name is a script of package.json", () => {
    const names = userDocs.flatMap(([, text]) => [...text.matchAll(/npm run ([a-z:-]+)/g)].map((m) => m[1]!));
    assert.ok(names.length > 0);
    for (const name of names) assert.ok(name in pkg.scripts, `npm run ${name}`);
  });

  test("README runs or checks every fenced block: ts, sh and the workflow's yaml, sql from the history guide, untagged diagrams without commands", () => {
    // test/archive/history-sql.test.ts runs every sql block of the guide against an archived fleet.
    const guide = readFileSync(join(guidesDir, "history-sql.md"), "utf8");
    const guideQueries = fencedBlocks(guide).filter((block) => block.lang === "sql");
    for (const block of fencedBlocks(readme)) {
      assert.ok(
        ["ts", "sh", "sql", "yaml", ""].includes(block.lang),
        `block at line ${block.line} is \`${block.lang}\`: only ts, sh, yaml (the workflow) and sql blocks are run`,
      );
      if (block.lang === "sql")
        assert.ok(
          guideQueries.some((query) => query.body === block.body),
          `the sql block at line ${block.line} is not one of docs/guides/history-sql.md's, which a test runs`,
        );
      if (block.lang === "")
        assert.doesNotMatch(
          block.body,
          /^\s*(?:\$\s*)?(?:npx |npm |turnstream |node )/m,
          `block at line ${block.line} holds a command: put it in a sh block`,
        );
    }
  });

  /** Every `NAME` in the first column of the generated configuration reference's tables. */
  function configurationReferenceNames(): Set<string> {
    const reference = readFileSync(join(repoRoot, "docs", "reference", "configuration.md"), "utf8");
    const names = new Set<string>();
    for (const row of reference.split("\n").filter((l) => l.startsWith("|"))) {
      const first = row.split("|")[1]!;
      for (const cell of first.matchAll(/`([^`]+)`/g)) if (/^[A-Z][A-Z0-9_]*$/.test(cell[1]!)) names.add(cell[1]!);
    }
    return names;
  }

  test("the configuration reference lists exactly the variables of src/telemetry/env-vars.ts", () => {
    const table = configurationReferenceNames();
    assert.ok(table.size >= 20);
    for (const name of ENV_VAR_NAMES)
      assert.ok(table.has(name), `${name} is in src/telemetry/env-vars.ts but not in docs/reference/configuration.md`);
    for (const name of table)
      assert.ok(ENV_VAR_NAMES.has(name), `${name} is in docs/reference/configuration.md but not in env-vars.ts`);
  });

  function codeFiles(dir: string): string[] {
    const out: string[] = [];
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) out.push(...codeFiles(path));
      else if (/\.(ts|mjs|lua)$/.test(entry)) out.push(path);
    }
    return out;
  }

  test("every TURNSTREAM_* variable src/ and workers/ name is in src/telemetry/env-vars.ts", () => {
    const named = new Map<string, string>();
    for (const file of [...codeFiles(join(repoRoot, "src")), ...codeFiles(join(repoRoot, "workers"))]) {
      if (file.endsWith(join("telemetry", "env-vars.ts"))) continue;
      for (const match of readFileSync(file, "utf8").matchAll(/\bTURNSTREAM_[A-Z][A-Z0-9_]*\b/g))
        if (!named.has(match[0])) named.set(match[0], file);
    }
    assert.ok(named.size >= 20);
    for (const [name, file] of named)
      assert.ok(ENV_VAR_NAMES.has(name), `${name} (named in ${file}) is not in src/telemetry/env-vars.ts`);
  });

  /** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as dashes. */
  function anchorOf(heading: string): string {
    return heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, "")
      .replace(/ /g, "-");
  }

  test("every link from the README and the guides to a section of a Markdown file finds its heading", () => {
    let checked = 0;
    for (const [doc, text] of userDocs) {
      for (const link of text.matchAll(/\]\(([^)\s#]*\.md)?#([^)\s]+)\)/g)) {
        const target = link[1] === undefined ? doc : join(doc, "..", link[1]);
        const headings = readFileSync(join(repoRoot, target), "utf8").matchAll(/^#+ (.+)$/gm);
        const anchors = new Set([...headings].map((heading) => anchorOf(heading[1]!)));
        checked++;
        assert.ok(anchors.has(link[2]!), `${doc} links to ${target}#${link[2]}, which has no such heading`);
      }
    }
    assert.ok(checked >= 5);
  });

  test("every repository path the README, the guides, CONTRIBUTING.md and docs/ARCHITECTURE.md name exists", () => {
    const roots = /^(?:src|test|docs|bench|workers|deploy|otel|scripts|\.ci)\//;
    let checked = 0;
    const docs = [...userDocs.map(([doc]) => doc), "CONTRIBUTING.md", join("docs", "ARCHITECTURE.md")];
    for (const doc of docs) {
      const text = readFileSync(join(repoRoot, doc), "utf8");
      const named = [...text.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]!);
      // Links with a scheme (https:, mailto:) point outside the repository.
      const linked = [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)\s]*)?\)/g)]
        .map((m) => m[1]!)
        .filter((target) => !/^[a-z]+:/.test(target))
        .map((target) => join(doc, "..", target));
      for (const path of [...named.filter((p) => roots.test(p)), ...linked]) {
        if (/[<*]/.test(path)) continue;
        checked++;
        assert.ok(existsSync(join(repoRoot, path)), `${doc} names ${path}, which is not in the repository`);
      }
    }
    assert.ok(checked >= 20);
  });
});
