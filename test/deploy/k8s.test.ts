// deploy/k8s without a cluster: every manifest kustomization.yaml lists parses and validates against
// its Kubernetes (or KEDA) schema, and the pieces agree with each other and with the code: probes on
// the ops server's port and paths, configuration only from env-vars.ts, secrets only in generated
// Secrets with no values in the repository, the ScaledObject on the queue lists src/queue uses, the
// security context's writable places covering what the processes write, the NetworkPolicies
// selecting the pods they are meant for.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1/NetworkPolicy";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication";
import { ENV_VAR_NAMES } from "../../src/telemetry/env-vars.ts";
import { isSecretEnvName } from "../../src/telemetry/secret-names.ts";
import { secretShapeIn } from "../../src/telemetry/patterns.ts";
import { connectRedis } from "../../src/log/index.ts";
import { closeTurnQueue, createTurnQueue } from "../../src/queue/index.ts";
import { startOpsServer } from "../../src/ops/index.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dir = join(root, "deploy", "k8s");

type Obj = Record<string, any>;
interface Manifest {
  file: string;
  doc: Obj;
}

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  "v1/Namespace": Namespace,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "apps/v1/Deployment": Deployment,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
  "keda.sh/v1alpha1/TriggerAuthentication": TriggerAuthentication,
};

const kustomization = parse(readFileSync(join(dir, "kustomization.yaml"), "utf8")) as Obj;
const manifests: Manifest[] = (kustomization["resources"] as string[]).flatMap((file) =>
  parseAllDocuments(readFileSync(join(dir, file), "utf8")).map((document) => {
    assert.deepEqual(document.errors, [], `${file} does not parse`);
    return { file, doc: document.toJS() as Obj };
  }),
);
/** The Secrets kustomize generates: names and keys from the committed `.example` of each env file. */
const generated: Manifest[] = ((kustomization["secretGenerator"] ?? []) as Obj[]).map((generator) => {
  const data: Record<string, string> = {};
  for (const envFile of generator["envs"] as string[]) {
    for (const line of readFileSync(join(dir, `${envFile}.example`), "utf8").split("\n")) {
      const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
      if (match !== null) data[match[1]!] = match[2]!;
    }
  }
  return {
    file: `${(generator["envs"] as string[]).join(",")}.example`,
    doc: { apiVersion: "v1", kind: "Secret", metadata: { name: generator["name"] }, stringData: data },
  };
});
const all = [...manifests, ...generated];

const only = (kind: string, name?: string): Obj => {
  const found = all.filter((m) => m.doc["kind"] === kind && (name === undefined || m.doc["metadata"]["name"] === name));
  assert.equal(found.length, 1, `expected one ${kind} ${name ?? ""}, found ${found.length}`);
  return found[0]!.doc;
};
const configMap = only("ConfigMap");
const config = configMap["data"] as Record<string, string>;
const opsPort = Number(config["TURNSTREAM_OPS_PORT"]);
const deployments = all.filter((m) => m.doc["kind"] === "Deployment").map((m) => m.doc);
const worker = only("Deployment", "turnstream-worker");
const projector = only("Deployment", "turnstream-projector");
const containerOf = (deployment: Obj): Obj => {
  assert.equal(
    deployment["spec"]["template"]["spec"]["containers"].length,
    1,
    `${deployment["metadata"]["name"]} has one container`,
  );
  return deployment["spec"]["template"]["spec"]["containers"][0];
};

/** Whether a label selector (matchLabels, matchExpressions In/NotIn/Exists) selects these labels. */
function selects(selector: Obj, labels: Record<string, string>): boolean {
  const okLabels = Object.entries((selector["matchLabels"] ?? {}) as Record<string, string>).every(
    ([key, value]) => labels[key] === value,
  );
  const okExprs = ((selector["matchExpressions"] ?? []) as Obj[]).every((expression) => {
    const value = labels[expression["key"]];
    if (expression["operator"] === "In")
      return value !== undefined && (expression["values"] as string[]).includes(value);
    if (expression["operator"] === "NotIn")
      return value === undefined || !(expression["values"] as string[]).includes(value);
    if (expression["operator"] === "Exists") return value !== undefined;
    return value === undefined;
  });
  return okLabels && okExprs;
}

/** A container port by name or number. */
function portOf(container: Obj, port: string | number): number | undefined {
  if (typeof port === "number") return port;
  return (container["ports"] as Obj[] | undefined)?.find((p) => p["name"] === port)?.["containerPort"];
}

test("kustomization lists every manifest in deploy/k8s, and each validates against its schema", () => {
  const onDisk = readdirSync(dir)
    .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
    .sort();
  assert.deepEqual([...(kustomization["resources"] as string[])].sort(), onDisk);
  assert.ok(manifests.length >= 10);
  for (const { file, doc } of all) {
    const key = `${doc["apiVersion"]}/${doc["kind"]}`;
    const Model = MODELS[key];
    assert.ok(Model !== undefined, `${file}: no schema for ${key}`);
    assert.doesNotThrow(
      () => new Model(doc).validate(),
      (err: unknown) => `${file} ${key} ${doc["metadata"]?.["name"]}: ${String(err)}`,
    );
    assert.equal(doc["metadata"]["namespace"], undefined, `${file}: the namespace comes from the kustomization`);
  }
  assert.equal(kustomization["namespace"], only("Namespace")["metadata"]["name"]);
  const imageNames = new Set(((kustomization["images"] ?? []) as Obj[]).map((i) => i["name"]));
  for (const deployment of deployments)
    assert.ok(
      imageNames.has(containerOf(deployment)["image"]),
      `${deployment["metadata"]["name"]}'s image is not set by the kustomization`,
    );
});

test("the ConfigMap holds only documented variables and no secrets; deployments reference only what exists", () => {
  for (const key of Object.keys(config)) {
    assert.ok(ENV_VAR_NAMES.has(key), `${key} is in the ConfigMap but not in src/telemetry/env-vars.ts`);
    assert.ok(!isSecretEnvName(key) && key !== "REDIS_URL", `${key} is a secret: it belongs in secrets.env`);
  }
  for (const deployment of deployments) {
    const name = deployment["metadata"]["name"];
    const container = containerOf(deployment);
    for (const from of (container["envFrom"] ?? []) as Obj[]) {
      if (from["configMapRef"] !== undefined) only("ConfigMap", from["configMapRef"]["name"]);
      if (from["secretRef"] !== undefined) only("Secret", from["secretRef"]["name"]);
    }
    for (const variable of (container["env"] ?? []) as Obj[]) {
      assert.ok(
        ENV_VAR_NAMES.has(variable["name"]),
        `${name} sets ${variable["name"]}, which env-vars.ts does not list`,
      );
      if (isSecretEnvName(variable["name"]) || variable["name"] === "REDIS_URL")
        assert.ok(variable["valueFrom"]?.["secretKeyRef"], `${name}: ${variable["name"]} must come from a Secret`);
      const ref = variable["valueFrom"]?.["secretKeyRef"] ?? variable["valueFrom"]?.["configMapKeyRef"];
      if (ref === undefined) continue;
      const source = only(variable["valueFrom"]["secretKeyRef"] ? "Secret" : "ConfigMap", ref["name"]);
      const keys = Object.keys({ ...source["data"], ...source["stringData"] });
      assert.ok(
        keys.includes(ref["key"]),
        `${name}: ${variable["name"]} refers to missing key ${ref["name"]}/${ref["key"]}`,
      );
    }
    for (const volume of deployment["spec"]["template"]["spec"]["volumes"] ?? []) {
      if (volume["persistentVolumeClaim"]) only("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]);
    }
  }
  const workerEnv = (containerOf(worker)["env"] as Obj[]).map((e) => e["name"]);
  assert.ok(workerEnv.includes("ANTHROPIC_API_KEY") && workerEnv.includes("REDIS_URL"));
});

test("no secret value is in the repository: the Secrets are generated from git-ignored files whose examples are empty", () => {
  for (const generator of generated) {
    for (const [key, value] of Object.entries(generator.doc["stringData"] as Record<string, string>)) {
      if (key !== "username") assert.equal(value, "", `${generator.file}: ${key} has a value; examples hold none`);
    }
  }
  for (const envFile of ((kustomization["secretGenerator"] ?? []) as Obj[]).flatMap((g) => g["envs"] as string[])) {
    // check-ignore exits 0 when git ignores the path: the filled-in file can never be committed.
    assert.doesNotThrow(
      () => execFileSync("git", ["check-ignore", "-q", join("deploy", "k8s", envFile)], { cwd: root }),
      `${envFile} is not git-ignored`,
    );
  }
  for (const file of readdirSync(dir)) {
    const text = readFileSync(join(dir, file), "utf8");
    assert.equal(secretShapeIn(text), undefined, `${file} holds something shaped like a secret`);
    assert.doesNotMatch(text, /\/\/[^\s/:@]+:[^\s/@]+@/, `${file} has a URL with a password`);
  }
  assert.equal(
    all.filter((m) => m.doc["kind"] === "Secret" && m.file.endsWith(".yaml")).length,
    0,
    "no Secret is written out as a manifest",
  );
});

test("probes and scrape annotations use the ops server's port and the paths it serves", async () => {
  assert.ok(Number.isInteger(opsPort) && opsPort > 0);
  assert.equal(
    config["TURNSTREAM_OPS_HOST"],
    "0.0.0.0",
    "the kubelet and Prometheus reach the pod on its IP, not loopback",
  );
  const ops = await startOpsServer({ port: 0, host: "127.0.0.1", checks: [{ name: "redis", check: () => true }] });
  try {
    for (const deployment of deployments) {
      const name = deployment["metadata"]["name"];
      const container = containerOf(deployment);
      for (const [probe, path] of [
        ["readinessProbe", "/readyz"],
        ["livenessProbe", "/healthz"],
      ] as const) {
        const get = container[probe]?.["httpGet"];
        assert.equal(get?.["path"], path, `${name} ${probe}`);
        assert.equal(portOf(container, get["port"]), opsPort, `${name} ${probe} port`);
        const res = await fetch(`http://127.0.0.1:${ops.port}${path}`);
        assert.equal(res.status, 200, `the ops server answers ${path}`);
      }
      const ann = deployment["spec"]["template"]["metadata"]["annotations"] as Record<string, string>;
      assert.equal(ann["prometheus.io/scrape"], "true");
      assert.equal(Number(ann["prometheus.io/port"]), opsPort, `${name} scrape port`);
      assert.equal(ann["prometheus.io/path"], "/metrics");
    }
  } finally {
    await ops.close();
  }
  const svc = only("Service");
  assert.equal(svc["spec"]["ports"].length, 1);
  for (const deployment of deployments) {
    assert.ok(
      selects({ matchLabels: svc["spec"]["selector"] }, deployment["spec"]["template"]["metadata"]["labels"]),
      `the Service does not select ${deployment["metadata"]["name"]}`,
    );
    assert.equal(portOf(containerOf(deployment), svc["spec"]["ports"][0]["targetPort"]), opsPort);
  }
});

test("pods run as non-root with a read-only root, and every place they write is a volume", () => {
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  assert.match(
    dockerfile.slice(dockerfile.lastIndexOf("\nFROM ")),
    /^USER node$/m,
    "the image's user is node (uid 1000 in the node images)",
  );
  for (const deployment of deployments) {
    const name = deployment["metadata"]["name"];
    const pod = deployment["spec"]["template"]["spec"];
    assert.equal(pod["securityContext"]["runAsNonRoot"], true, name);
    assert.equal(pod["securityContext"]["runAsUser"], 1000, name);
    assert.equal(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", name);
    assert.equal(pod["automountServiceAccountToken"], false, name);
    const container = containerOf(deployment);
    assert.equal(container["securityContext"]["readOnlyRootFilesystem"], true, name);
    assert.equal(container["securityContext"]["allowPrivilegeEscalation"], false, name);
    assert.deepEqual(container["securityContext"]["capabilities"]["drop"], ["ALL"], name);
    assert.ok(
      container["resources"]["requests"]["cpu"] &&
        container["resources"]["requests"]["memory"] &&
        container["resources"]["limits"]["memory"],
      `${name} resources`,
    );
    const mounts = (container["volumeMounts"] as Obj[])
      .filter((m) => m["readOnly"] !== true)
      .map((m) => m["mountPath"] as string);
    const volumes = new Set((pod["volumes"] as Obj[]).map((v) => v["name"]));
    for (const mount of container["volumeMounts"] as Obj[])
      assert.ok(volumes.has(mount["name"]), `${name} mounts unknown volume ${mount["name"]}`);
    const onVolume = (p: string): boolean => mounts.some((m) => p === m || p.startsWith(`${m}/`));
    for (const variable of ["HOME", "TMPDIR"])
      assert.ok(onVolume(config[variable]!), `${name}: ${variable}=${config[variable]} is on the read-only root`);
  }
  const workerMounts = (containerOf(worker)["volumeMounts"] as Obj[]).map((m) => m["mountPath"] as string);
  for (const configuredRoot of [
    config["TURNSTREAM_INSTANCE_ROOT"]!,
    ...config["TURNSTREAM_WORKSPACE_ROOTS"]!.split(":"),
  ]) {
    assert.ok(
      workerMounts.some((m) => configuredRoot === m || configuredRoot.startsWith(`${m}/`)),
      `the worker writes ${configuredRoot}, which is on no volume`,
    );
  }
  const ws = (worker["spec"]["template"]["spec"]["volumes"] as Obj[]).find((v) => v["persistentVolumeClaim"]);
  assert.deepEqual(
    only("PersistentVolumeClaim", ws!["persistentVolumeClaim"]["claimName"])["spec"]["accessModes"],
    ["ReadWriteMany"],
    "every worker pod shares the workspaces",
  );
});

test("the worker: stable instance id from the pod name, and a grace period longer than its shutdown grace", () => {
  const id = (containerOf(worker)["env"] as Obj[]).find((e) => e["name"] === "TURNSTREAM_INSTANCE_ID");
  assert.equal(id?.["valueFrom"]?.["fieldRef"]?.["fieldPath"], "metadata.name");
  const graceMs = Number(config["TURNSTREAM_SHUTDOWN_GRACE_MS"]);
  assert.ok(graceMs > 0);
  const podGraceMs = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] * 1000;
  assert.ok(
    podGraceMs >= graceMs + 10_000,
    `terminationGracePeriodSeconds (${podGraceMs} ms) leaves no room after TURNSTREAM_SHUTDOWN_GRACE_MS (${graceMs} ms)`,
  );
  assert.deepEqual(containerOf(worker)["command"], ["node", "dist/bin/turnstream.js", "worker"]);
  assert.deepEqual(containerOf(projector)["command"], ["node", "dist/bin/turnstream.js", "projector"]);
  assert.equal(projector["spec"]["replicas"], 1);
  for (const deployment of deployments) {
    assert.ok(
      selects(deployment["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]),
      `${deployment["metadata"]["name"]}'s selector misses its own pods`,
    );
  }
  assert.ok(
    !selects(worker["spec"]["selector"], projector["spec"]["template"]["metadata"]["labels"]),
    "the worker's selector takes in projector pods",
  );
  assert.ok(
    !selects(projector["spec"]["selector"], worker["spec"]["template"]["metadata"]["labels"]),
    "the projector's selector takes in worker pods",
  );
});

test("the ScaledObject scales the worker Deployment on the queue lists src/queue uses, one pod per concurrency", async () => {
  const so = only("ScaledObject");
  assert.deepEqual(so["spec"]["scaleTargetRef"], {
    apiVersion: "apps/v1",
    kind: "Deployment",
    name: worker["metadata"]["name"],
  });
  // The keys BullMQ computes for the queue the ConfigMap configures (no job is added; nothing is written).
  const redis = connectRedis();
  const queue = createTurnQueue({
    redis,
    queuePrefix: config["TURNSTREAM_QUEUE_PREFIX"],
    queueName: config["TURNSTREAM_QUEUE_NAME"],
  });
  const keys = { wait: queue.keys["wait"], active: queue.keys["active"] };
  await closeTurnQueue(queue);
  redis.disconnect();
  const triggers = so["spec"]["triggers"] as Obj[];
  assert.deepEqual(
    triggers.map((t) => [t["type"], t["metadata"]["listName"]]).sort(),
    [
      ["redis", keys.active],
      ["redis", keys.wait],
    ].sort(),
  );
  const modifiers = so["spec"]["advanced"]["scalingModifiers"];
  const formulaNames = String(modifiers["formula"])
    .match(/[A-Za-z_]\w*/g)!
    .sort();
  assert.deepEqual(formulaNames, triggers.map((t) => t["name"]).sort(), "the formula adds up exactly the triggers");
  assert.equal(
    Number(modifiers["target"]),
    Number(config["TURNSTREAM_CONCURRENCY"]),
    "one pod per TURNSTREAM_CONCURRENCY turns",
  );
  for (const trigger of triggers) {
    const auth = only("TriggerAuthentication", trigger["authenticationRef"]["name"]);
    for (const ref of auth["spec"]["secretTargetRef"] as Obj[]) {
      const secret = only("Secret", ref["name"]);
      assert.ok(ref["key"] in secret["stringData"], `${ref["name"]} has no ${ref["key"]}`);
    }
  }
});

test("NetworkPolicies: deny by default; each pod's policy allows the ops port from monitoring and only the egress it needs", () => {
  const policies = all.filter((m) => m.doc["kind"] === "NetworkPolicy").map((m) => m.doc);
  const deny = policies.find((p) => Object.keys(p["spec"]["podSelector"]).length === 0);
  assert.ok(deny !== undefined, "a default-deny policy selects every pod");
  assert.deepEqual([...deny["spec"]["policyTypes"]].sort(), ["Egress", "Ingress"]);
  assert.equal(deny["spec"]["ingress"], undefined);
  assert.equal(deny["spec"]["egress"], undefined);
  const otlpPort = Number(new URL(config["OTEL_EXPORTER_OTLP_ENDPOINT"]!).port);
  const expected: Array<[Obj, number[]]> = [
    [worker, [53, 6379, otlpPort, 443]],
    [projector, [53, 6379, otlpPort]],
  ];
  for (const [deployment, egressPorts] of expected) {
    const name = deployment["metadata"]["name"];
    const labels = deployment["spec"]["template"]["metadata"]["labels"];
    const mine: Obj[] = policies.filter((p) => p !== deny && selects(p["spec"]["podSelector"], labels));
    assert.equal(mine.length, 1, `${name} is selected by ${mine.length} allow policies`);
    const policySpec = mine[0]!["spec"];
    const ingressPorts = (policySpec["ingress"] as Obj[]).flatMap((r) => (r["ports"] as Obj[]).map((x) => x["port"]));
    assert.deepEqual(ingressPorts, [opsPort], `${name} ingress`);
    for (const rule of policySpec["ingress"] as Obj[]) {
      assert.deepEqual(rule["from"], [
        { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } },
      ]);
    }
    const allowed = new Set(
      (policySpec["egress"] as Obj[]).flatMap((r) => (r["ports"] as Obj[]).map((x) => x["port"])),
    );
    for (const port of egressPorts) assert.ok(allowed.has(port), `${name} cannot reach port ${port}`);
    for (const port of allowed)
      assert.ok(egressPorts.includes(port) || port === 4317, `${name} may reach port ${port}, which it does not need`);
  }
});

test("the .env examples exist for every generated Secret", () => {
  for (const generator of (kustomization["secretGenerator"] ?? []) as Obj[]) {
    for (const envFile of generator["envs"] as string[])
      assert.ok(existsSync(join(dir, `${envFile}.example`)), `${envFile}.example is missing`);
  }
});
