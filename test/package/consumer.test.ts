// The package as a user gets it: `npm pack`, then a plain `npm install` of the tarball into an empty
// project, and from there (a) a program importing the producer and worker entries runs a real turn
// through the scripted model server, (b) every entry imports and holds the names its declarations
// promise, (c) TypeScript checks consumer code against the published declarations alone, and (d) the
// installed `turnstream` command answers --version and doctor.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { connectRedis } from "../../src/log/index.ts";
import { hermeticEnv, startModelServer } from "../../src/testing/index.ts";
import { ensureBuilt, repoRoot } from "../support/build.ts";
import { ENTRY_POINTS, publicApi } from "./_api.ts";

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  version: string;
  devDependencies: Record<string, string>;
};
const work = mkdtempSync(join(tmpdir(), "turnstream-consumer-"));
const project = join(work, "project");
const fixtures = join(repoRoot, "test", "package", "consumer");
let packedFiles: string[] = [];
let installMs = 0;

/** The environment of a user's shell: this repo's Node first on PATH, no npm settings of the npm running the tests. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^npm_/i.test(name)) env[name] = value;
  env["PATH"] = `${dirname(process.execPath)}:${process.env["PATH"] ?? ""}`;
  return { ...env, ...extra };
}

function pack(): string {
  const out = execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], {
    cwd: repoRoot,
    env: userEnv(),
    encoding: "utf8",
  });
  const [info] = JSON.parse(out) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packedFiles = info!.files.map((f) => f.path);
  return join(work, info!.filename);
}

function install(tarball: string): void {
  mkdirSync(project);
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module" }, null, 2),
  );
  const started = performance.now();
  execFileSync(
    "npm",
    [
      "install",
      tarball,
      `@types/node@${pkg.devDependencies["@types/node"]}`,
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
    ],
    { cwd: project, env: userEnv(), stdio: ["ignore", "ignore", "inherit"] },
  );
  installMs = performance.now() - started;
  for (const file of ["turn.mjs", "entries.mjs", "consumer.ts"]) cpSync(join(fixtures, file), join(project, file));
}

describe("the package as a user installs it", () => {
  before(() => {
    // The prepack script builds too; the tests build once for every test that needs dist/, and pack
    // what that build left.
    ensureBuilt();
    install(pack());
  });

  after(() => rmSync(work, { recursive: true, force: true }));

  test("the tarball holds the built package, the licence and the README, and no sources", (context) => {
    context.diagnostic(`npm install of the tarball: ${Math.round(installMs)} ms`);
    for (const file of [
      "package.json",
      "README.md",
      "LICENSE",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/bin/turnstream.js",
      "dist/testing/index.js",
      "dist/entries/runner.js",
      "dist/entries/runner.d.ts",
      "dist/protocol/index.d.ts",
      "dist/log/lua/append.lua",
      "dist/projector/lua/commit.lua",
      "dist/decisions/forwarder.mjs",
    ]) {
      assert.ok(packedFiles.includes(file), `${file} is not in the tarball`);
    }
    const stray = packedFiles.filter(
      (f) => !f.startsWith("dist/") && !["package.json", "README.md", "LICENSE"].includes(f),
    );
    assert.deepEqual(stray, []);
    assert.deepEqual(
      packedFiles.filter((f) => /(?<!\.d)\.ts$/.test(f) || f.includes(".build-stamp")),
      [],
    );
    // A user's install should not take minutes: the tarball comes from disk, the dependencies from the warm cache.
    assert.ok(installMs < 90_000, `npm install took ${Math.round(installMs)} ms`);
  });

  test("every entry of the installed package imports and holds exactly the run-time names it declares", async () => {
    const specifiers = Object.keys(ENTRY_POINTS).map((subpath) => "turnstream" + subpath.slice(1));
    const { stdout } = await run(process.execPath, ["entries.mjs", ...specifiers], { cwd: project, env: userEnv() });
    const loaded = JSON.parse(stdout) as Record<string, string[]>;
    const api = publicApi();
    for (const subpath of Object.keys(ENTRY_POINTS)) {
      assert.deepEqual(loaded["turnstream" + subpath.slice(1)], api[subpath]!.values, `turnstream${subpath.slice(1)}`);
    }
  });

  test("a program importing turnstream/producer and turnstream/worker runs a real turn through the scripted model server", async () => {
    const workspace = join(work, "workspace");
    mkdirSync(workspace);
    const tag = randomBytes(4).toString("hex");
    const logPrefix = `tsconsumer${tag}:`;
    const queuePrefix = `{tsconsumer${tag}}`;
    try {
      const { stdout } = await run(process.execPath, ["turn.mjs", workspace, logPrefix, queuePrefix], {
        cwd: project,
        env: userEnv(),
        timeout: 150_000,
      });
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
        status: string;
        resultText: string;
        cliSessionId: string;
      };
      assert.equal(result.status, "finished");
      assert.equal(result.resultText, "hello from the consumer");
      assert.match(result.cliSessionId, /^[0-9a-f-]{36}$/);
    } finally {
      const redis = connectRedis();
      for (const prefix of [logPrefix, queuePrefix]) {
        const keys = await redis.keys(`${prefix}*`);
        if (keys.length > 0) await redis.del(...keys);
      }
      redis.disconnect();
    }
  });

  test("consumer TypeScript type-checks against the published declarations", async () => {
    const tsconfig = {
      compilerOptions: {
        target: "es2024",
        module: "nodenext",
        moduleResolution: "nodenext",
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ["node"],
      },
      files: ["consumer.ts"],
    };
    writeFileSync(join(project, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
    const tsc = join(repoRoot, "node_modules", ".bin", "tsc");
    const result = await run(tsc, ["-p", join(project, "tsconfig.json")], { cwd: project, env: userEnv() }).catch(
      (err: { stdout: string }) => err,
    );
    assert.equal("code" in result ? result.stdout : "", "", "tsc reported errors");
  });

  test("the installed turnstream command prints its version and passes doctor against the scripted model server", async () => {
    const bin = join(project, "node_modules", ".bin", "turnstream");
    const version = await run(bin, ["--version"], { env: userEnv() });
    assert.equal(version.stdout.trim(), pkg.version);
    const server = await startModelServer({ script: { responses: [{ content: [{ type: "text", text: "hello" }] }] } });
    const hermetic = hermeticEnv({ baseUrl: server.url, root: join(work, "doctor") });
    try {
      const doctor = await run(bin, ["doctor", "--cwd", join(work, "doctor-cwd")], {
        env: userEnv(hermetic.env),
        timeout: 90_000,
      });
      assert.match(doctor.stdout, /^pass\s+probe/m);
      assert.match(doctor.stdout, /^pass\s+cli\b/m);
    } finally {
      await server.close();
    }
  });
});
