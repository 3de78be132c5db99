// Docker cannot run here, so the deployment files are checked by reading them: services and ports,
// health checks, the worker's workspace and user, collector pipelines wired to defined components,
// collector patterns generated from the scrubber's, and every variable compose sets being documented
// and actually read by the code. compose-run.test.ts starts the services' commands.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { ENV_VAR_NAMES } from "../../src/telemetry/env-vars.ts";
import { collectorRedaction, COLLECTOR_FILE, generatedCollectorYaml } from "../../scripts/gen-collector.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const compose = parse(readFileSync(join(root, "docker-compose.yml"), "utf8"), { merge: true }) as {
  services: Record<string, Record<string, any>>;
  volumes?: Record<string, unknown>;
};
const collector = parse(readFileSync(join(root, "otel", "collector.yaml"), "utf8")) as Record<string, any>;

test("compose has the five services; workers scale (no container_name, no host port)", () => {
  assert.deepEqual(Object.keys(compose.services).sort(), ["jaeger", "otel-collector", "projector", "redis", "worker"]);
  const worker = compose.services["worker"]!;
  assert.equal(worker["container_name"], undefined);
  assert.equal(worker["ports"], undefined);
  assert.deepEqual(worker["command"], ["node", "dist/bin/turnstream.js", "worker"]);
  assert.deepEqual(compose.services["projector"]!["command"], ["node", "dist/bin/turnstream.js", "projector"]);
  for (const [name, svc] of Object.entries(compose.services)) {
    assert.equal(svc["container_name"], undefined, `${name} has a fixed container_name`);
    for (const port of (svc["ports"] ?? []) as string[]) {
      assert.match(String(port), /^127\.0\.0\.1:\d+:\d+$/, `${name} publishes ${port} beyond loopback`);
    }
  }
  const collectorBuild = compose.services["otel-collector"]!["build"] as { context: string; dockerfile: string };
  const collectorDockerfile = readFileSync(join(root, collectorBuild.context, collectorBuild.dockerfile), "utf8");
  assert.match(collectorDockerfile, /^FROM otel\/opentelemetry-collector-contrib:/m);
  assert.match(String(compose.services["jaeger"]!["image"]), /^jaegertracing\/jaeger:2\./);
  assert.ok(
    (compose.services["otel-collector"]!["volumes"] as string[]).some((v) => v.startsWith("./otel/collector.yaml:")),
  );
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  assert.match(dockerfile, /npm ci/);
  assert.match(dockerfile, /COPY package\.json package-lock\.json/);
  assert.match(dockerfile, /npm run build/);
});

test("every long-running service has a health check, and the turnstream ones use a command their image has", () => {
  for (const [name, svc] of Object.entries(compose.services)) {
    const check = svc["healthcheck"] as { test: string[] } | undefined;
    assert.ok(
      check !== undefined && Array.isArray(check.test) && check.test[0] === "CMD",
      `${name} has no health check`,
    );
  }
  for (const name of ["worker", "projector"]) {
    assert.deepEqual((compose.services[name]!["healthcheck"] as { test: string[] }).test, [
      "CMD",
      "node",
      "dist/bin/turnstream.js",
      "healthcheck",
      "--ready",
    ]);
    // --ready asks the ops endpoint, so the service must run one, reachable from the container's loopback.
    const env = compose.services[name]!["environment"] as Record<string, string>;
    assert.match(String(env["TURNSTREAM_OPS_PORT"]), /^[1-9]\d*$/, `${name} has no ops port for its health check`);
    assert.equal(
      env["TURNSTREAM_OPS_HOST"],
      "0.0.0.0",
      `${name}'s ops endpoint is not reachable from the compose network`,
    );
  }
  assert.ok(existsSync(join(root, "src", "bin", "commands", "healthcheck.ts")));
  assert.equal(compose.services["worker"]!["depends_on"]["otel-collector"]["condition"], "service_healthy");
});

test("the worker runs as a non-root user with a workspace volume under each of its roots", () => {
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  const runtimeStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  const user = /^USER (\S+)/m.exec(runtimeStage)?.[1];
  assert.ok(user !== undefined && user !== "root" && user !== "0", `the image runs as ${user ?? "root"}`);
  assert.match(runtimeStage, new RegExp(`chown ${user}:${user} /workspace`));
  const worker = compose.services["worker"]!;
  const roots = String(worker["environment"]["TURNSTREAM_WORKSPACE_ROOTS"] ?? "")
    .split(":")
    .filter((r) => r !== "");
  assert.ok(roots.length > 0, "TURNSTREAM_WORKSPACE_ROOTS is not set for the worker");
  const mounts = ((worker["volumes"] ?? []) as string[]).map((volume) => ({
    source: volume.split(":")[0]!,
    target: volume.split(":")[1]!,
  }));
  for (const workspaceRoot of roots) {
    const mount = mounts.find((m) => workspaceRoot === m.target || workspaceRoot.startsWith(`${m.target}/`));
    assert.ok(mount !== undefined, `${workspaceRoot} is on no volume`);
    assert.ok(mount.source in (compose.volumes ?? {}), `${mount.source} is not a named volume`);
  }
});

test("services reach each other by compose names that exist", () => {
  const env = compose.services["worker"]!["environment"] as Record<string, string | null>;
  assert.equal(new URL(env["REDIS_URL"]!).hostname, "redis");
  assert.equal(new URL(env["OTEL_EXPORTER_OTLP_ENDPOINT"]!).hostname, "otel-collector");
  assert.equal(new URL(env["OTEL_EXPORTER_OTLP_ENDPOINT"]!).port, "4318");
  assert.equal(env["ANTHROPIC_API_KEY"], null, "the API key is passed through from the shell, never written");
  const jaegerEndpoint = String(collector["exporters"]["otlp/jaeger"]["endpoint"]);
  assert.equal(jaegerEndpoint.split(":")[0], "jaeger");
  for (const [name, svc] of Object.entries(compose.services)) {
    const deps = svc["depends_on"];
    for (const dependency of Array.isArray(deps) ? deps : Object.keys(deps ?? {}))
      assert.ok(dependency in compose.services, `${name} depends on unknown ${dependency}`);
  }
});

test("collector pipelines use only defined components, and end with redaction before export", () => {
  const pipelines = collector["service"]["pipelines"] as Record<
    string,
    { receivers: string[]; processors: string[]; exporters: string[] }
  >;
  assert.ok(pipelines["traces"] !== undefined);
  for (const [name, pipeline] of Object.entries(pipelines)) {
    for (const kind of ["receivers", "processors", "exporters"] as const) {
      assert.ok(pipeline[kind].length > 0 || kind === "processors", `${name} has no ${kind}`);
      for (const component of pipeline[kind])
        assert.ok(component in (collector[kind] ?? {}), `${name} uses undefined ${kind.slice(0, -1)} ${component}`);
    }
    const procs = pipeline.processors;
    assert.ok(
      procs.includes("redaction") && procs.some((x) => x.startsWith("transform")),
      `${name} lacks redaction/transform`,
    );
    assert.ok(procs.indexOf("transform/scrub") < procs.indexOf("redaction"));
  }
  for (const ext of collector["service"]["extensions"] ?? []) assert.ok(ext in collector["extensions"]);
  assert.deepEqual(Object.keys(collector["receivers"]["otlp"]["protocols"]).sort(), ["grpc", "http"]);
  assert.equal(collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"], "0.0.0.0:4318");
});

// RE2 and JS agree on the subset the collector file uses; `(?i)` becomes the i flag, `(?P<` is `(?<`.
const toJs = (re2: string): RegExp => {
  const js = re2.replaceAll("(?P<", "(?<");
  return js.startsWith("(?i)") ? new RegExp(js.slice(4), "i") : new RegExp(js);
};

const SAMPLES: Record<string, string> = {
  anthropic_key: "sk-ant-api03-AbCdEf0123456789_xyz",
  github_token: "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
  github_pat: "github_pat_11ABCDEFG0123456789_abcdefghij",
  aws_access_key_id: "AKIAIOSFODNN7EXAMPLE",
  aws_secret_access_key: "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  slack_token: "xoxb-123456789012-abcdefghijkl",
  jwt: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  bearer_token: "Authorization: Bearer abc.DEF-123_456~xyz",
  basic_auth: "Authorization: Basic dXNlcjpwYXNzd29yZA==",
  private_key: "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
  connection_password: "postgres://bob:hunter2@db:5432/app",
};

test("the collector's redaction is exactly what npm run gen:collector makes from the scrubber's patterns", () => {
  const text = readFileSync(COLLECTOR_FILE, "utf8");
  assert.equal(text, generatedCollectorYaml(text), "otel/collector.yaml is stale: run npm run gen:collector");
  const generated = collectorRedaction();
  assert.deepEqual(collector["processors"]["redaction"]["blocked_values"], generated.blockedValues);
  assert.deepEqual(collector["processors"]["transform/scrub"]["trace_statements"], generated.traceStatements);
});

test("collector block patterns catch every secret shape the scrubber knows, and spare ordinary text", () => {
  const blocked = (collector["processors"]["redaction"]["blocked_values"] as string[]).map(toJs);
  const statements = (
    collector["processors"]["transform/scrub"]["trace_statements"] as Array<{ context: string; statements: string[] }>
  ).flatMap((s) => s.statements);
  for (const [name, sample] of Object.entries(SAMPLES)) {
    assert.ok(
      blocked.some((re) => re.test(sample)),
      `redaction processor misses ${name}`,
    );
  }
  for (const ordinary of [
    "https://example.com/docs",
    "bearer of news",
    "ASIAN",
    '{"input_tokens":12}',
    "git@github.com:o/r.git",
  ]) {
    assert.ok(!blocked.some((re) => re.test(ordinary)), `redaction would mask ordinary text: ${ordinary}`);
  }
  assert.ok(statements.includes('delete_key(attributes, "exception.stacktrace")'));
});

function sourceFiles(dir: string): string[] {
  let out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const entry of entries) {
    const entryPath = join(dir, entry);
    if (statSync(entryPath).isDirectory()) out = out.concat(sourceFiles(entryPath));
    else if (/\.(ts|lua)$/.test(entry)) out.push(entryPath);
  }
  return out;
}

// A variable counts as read when code names it: process.env.X, env.X, env["X"], a "X" literal
// passed to a reader, or a key of a zod schema the environment is parsed with (`X: z.string()…`,
// `X: intFrom(…)`, also when Prettier puts the chain's first call on the next line). The documentation
// list itself does not count.
function readInCode(name: string): string[] {
  const files = [...sourceFiles(join(root, "src")), ...sourceFiles(join(root, "workers"))].filter(
    (f) => !f.endsWith(join("telemetry", "env-vars.ts")),
  );
  const re = new RegExp(
    `(?:\\benv\\.${name}\\b|\\[\\s*["'\`]${name}["'\`]\\s*\\]|["'\`]${name}["'\`]|^\\s*${name}\\s*:\\s*\\w+(?:\\s*\\.\\w+)*\\s*\\()`,
    "m",
  );
  return files.filter((f) => re.test(readFileSync(f, "utf8"))).map((f) => relative(root, f));
}

test("every variable compose sets is documented in env-vars.ts and read by the code", () => {
  const set = new Set<string>();
  for (const svc of Object.values(compose.services)) {
    const env = svc["environment"];
    if (env === undefined || !String(svc["image"] ?? "").startsWith("turnstream")) continue;
    const names = Array.isArray(env) ? env.map((e: string) => e.split("=")[0]!) : Object.keys(env);
    for (const name of names) set.add(name);
  }
  assert.ok(set.size >= 4);
  for (const name of set) {
    assert.ok(
      ENV_VAR_NAMES.has(name),
      `${name} is set in docker-compose.yml but not documented in src/telemetry/env-vars.ts`,
    );
    assert.ok(
      readInCode(name).length > 0,
      `${name} is set in docker-compose.yml but nothing in src/ or workers/ reads it`,
    );
  }
});

test("every documented variable is read by the code (the list cannot drift)", () => {
  for (const name of ENV_VAR_NAMES)
    assert.ok(readInCode(name).length > 0, `${name} is documented but not read in src/ or workers/`);
});
