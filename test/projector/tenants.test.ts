// A session's tenant in the read model and in `turnstream sessions`: taken from the turns a real
// producer queued, filtered by --tenant and --label, carried by --json; and what an imported log (or
// whoever writes Redis) says a tenant is never reaches the listing unless it is a tenant name.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Envelope } from "../../src/log/index.ts";
import {
  fold,
  projectionKeys,
  readModel,
  readPointer,
  sessionRowOf,
  startProjector,
  type SessionRow,
} from "../../src/projector/index.ts";
import { createProducer } from "../../src/queue/index.ts";
import { fixtureLog, redisCtx, rid, root } from "./_support.ts";

const exec = promisify(execFile);
const ctx = redisCtx();
const queuePrefix = `{${rid("tq")}}`;
const dir = mkdtempSync(join(tmpdir(), "ts-tenants-"));
after(async () => {
  const keys = await ctx.redis.keys(`${queuePrefix}*`);
  if (keys.length > 0) await ctx.redis.del(...keys);
  await ctx.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const node = join(root, "node_modules", ".bin", "node");
const bin = join(root, "src", "bin", "turnstream.ts");

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const output = await exec(node, [bin, ...args], {
      cwd: root,
      env: { ...process.env, TURNSTREAM_PREFIX: ctx.prefix, NO_COLOR: "1" },
    });
    return { code: 0, stdout: output.stdout, stderr: output.stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

/** `turnstream sessions --json …` as rows by session id. */
async function listed(args: string[] = []): Promise<Map<string, Record<string, unknown>>> {
  const output = await cli(["sessions", "--json", ...args]);
  assert.equal(output.code, 0, output.stderr);
  const rows = output.stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  return new Map(rows.map((row) => [row["session"] as string, row]));
}

const ESC = "\u001b";
const RLO = "\u202e";
/** Control (but line feed), bidi and invisible characters: what must never reach a terminal raw. */
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/;

/** What an attacker may write as a tenant in a log they hand over for import. */
const HOSTILE_TENANTS = [
  `acme${ESC}[2J${ESC}]8;;http://evil${ESC}\\`,
  "<img src=x onerror=alert(1)>",
  `acme${RLO}ipa`,
  "acme\napi",
  "acme\u0000",
  "",
  "-starts-with-dash",
  "x".repeat(101),
];

const pick = ({ tenant, labels }: SessionRow): Pick<SessionRow, "tenant" | "labels"> => ({ tenant, labels });

/** A turn.queued of `turn` with `data` (over the fields a producer always writes). */
function queued(session: string, seq: number, turn: string, data: Record<string, unknown>): Envelope {
  return {
    v: 1,
    seq,
    session,
    turn,
    attempt: 0,
    epoch: 0,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
    kind: "turn.queued",
    data: { prompt: "hi", cwd: "/work", ...data },
  };
}

test("the read model's tenant: the first turn that names a tenant name; anything else is dropped", () => {
  for (const hostile of HOSTILE_TENANTS) {
    const state = fold([queued("s", 1, "t1", { tenant: hostile })]);
    assert.equal(state.view.tenant, null, JSON.stringify(hostile));
    assert.equal(state.carried.total, 0, "a string tenant fits the event's schema; it is only not shown");
  }
  // A hostile first turn does not hide the valid tenant a later turn names; the first valid one stays.
  const state = fold([
    queued("s", 1, "t1", { tenant: HOSTILE_TENANTS[0] }),
    queued("s", 2, "t2", { tenant: "acme/api", labels: { team: "core" } }),
    queued("s", 3, "t3", { tenant: "globex", labels: { team: "infra", pr: "7" } }),
  ]);
  assert.equal(state.view.tenant, "acme/api");
  assert.deepEqual(state.view.turns[2]!.labels, { team: "infra", pr: "7" });
  // A stored state is a Redis writer's text: its line shows no tenant or labels that break the rules.
  const stored = fold([queued("s", 1, "t1", { tenant: "acme/api", labels: { team: "core" } })]);
  stored.view.tenant = HOSTILE_TENANTS[0]!;
  stored.view.turns[0]!.labels = { team: `core${ESC}[31m` };
  assert.deepEqual(pick(sessionRowOf("s", stored)), { tenant: null, labels: {} });
  // A non-string tenant does not fit the schema: the event counts as malformed, as any such data.
  const malformed = fold([queued("s", 1, "t1", { tenant: 7 })]);
  assert.equal(malformed.view.tenant, null);
  assert.equal(malformed.carried.malformed["turn.queued"], 1);
});

test("turnstream sessions: --tenant and --label filter, --json carries tenant and labels, hostile tenants never shown", async () => {
  const producer = createProducer({ redis: ctx.redis, logPrefix: ctx.prefix, queuePrefix });
  const ws = join(dir, "ws");
  try {
    const acme = await producer.enqueueTurn({ prompt: "a", cwd: ws, tenant: "acme/api", labels: { team: "core" } });
    // A later turn naming no tenant is the session's; its label value replaces the first's.
    await producer.enqueueTurn({ session: acme.session, prompt: "b", cwd: ws, labels: { team: "web", pr: "7" } });
    const acmeOther = await producer.enqueueTurn({ prompt: "c", cwd: ws, tenant: "acme/api", labels: { team: "ops" } });
    const globex = await producer.enqueueTurn({ prompt: "d", cwd: ws, tenant: "globex", labels: { team: "web" } });
    const none = await producer.enqueueTurn({ prompt: "e", cwd: ws });

    // An exported log someone hands over, its tenant a terminal escape: imported as it is.
    const hostile = rid("evil");
    const exported = join(dir, "hostile.jsonl");
    const events = fixtureLog("today-session").map((event) =>
      event.kind === "turn.queued"
        ? { ...event, session: hostile, data: { ...(event.data as object), tenant: HOSTILE_TENANTS[0] } }
        : { ...event, session: hostile },
    );
    writeFileSync(exported, events.map((event) => JSON.stringify(event)).join("\n") + "\n");
    const imported = await cli(["import", hostile, exported]);
    assert.equal(imported.code, 0, imported.stderr);

    // Folded from the log (no projector yet), then from the read models: the same rows.
    const folded = await listed();
    const projector = startProjector({ redis: ctx.redis, prefix: ctx.prefix, rescanMs: 100, blockMs: 200 });
    try {
      await projector.waitIdle(20_000);
    } finally {
      await projector.stop();
    }
    const all = await listed();
    assert.equal((await readModel(ctx.redis, acme.session, { prefix: ctx.prefix }))?.state.view.tenant, "acme/api");
    for (const [session, row] of all) {
      assert.equal(row["source"], "projection", session);
      const { source: _projected, projectedSeq: _seq, ...rest } = row;
      const { source: _folded, projectedSeq: _foldedSeq, ...foldedRest } = folded.get(session)!;
      assert.deepEqual(rest, foldedRest, session);
    }
    assert.deepEqual(
      { tenant: all.get(acme.session)!["tenant"], labels: all.get(acme.session)!["labels"] },
      { tenant: "acme/api", labels: { team: "web", pr: "7" } },
    );
    assert.equal(all.get(none.session)!["tenant"], null);
    assert.deepEqual(all.get(none.session)!["labels"], {});
    assert.equal(all.get(hostile)!["tenant"], null);

    const ids = (rows: Map<string, unknown>): string[] => [...rows.keys()].sort();
    assert.deepEqual(ids(await listed(["--tenant", "acme/api"])), [acme.session, acmeOther.session].sort());
    assert.deepEqual(ids(await listed(["--tenant", "globex"])), [globex.session]);
    assert.deepEqual(ids(await listed(["--label", "team=web"])), [acme.session, globex.session].sort());
    assert.deepEqual(ids(await listed(["--tenant", "acme/api", "--label", "team=web", "--label", "pr=7"])), [
      acme.session,
    ]);
    assert.deepEqual(ids(await listed(["--tenant", "nobody"])), []);

    const table = await cli(["sessions"]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /SESSION\s+STATUS\s+TURNS\s+COST\s+LAST ACTIVITY\s+EVENTS\s+PENDING\s+TENANT/);
    assert.match(table.stdout, new RegExp(`${acme.session}\\s+queued\\s+2\\s.*\\sacme/api\\n`));
    assert.match(table.stdout, new RegExp(`${hostile} \\(imported\\)\\s.*\\s-\\n`));
    assert.doesNotMatch(table.stdout, UNSAFE);
    const none2 = await cli(["sessions", "--tenant", "nobody"]);
    assert.match(none2.stdout, /^no sessions match under key prefix/);

    // Whoever writes Redis can write a read model: a stored summary's tenant and labels are shown
    // only when they keep the rules the reducer keeps.
    const keys = projectionKeys(ctx.prefix, globex.session, 1);
    const model = keys.modelOf((await readPointer(ctx.redis, keys))!);
    const summary = JSON.parse((await ctx.redis.hget(model, "summary"))!) as Record<string, unknown>;
    await ctx.redis.hset(
      model,
      "summary",
      JSON.stringify({ ...summary, tenant: HOSTILE_TENANTS[0], labels: { team: `web${ESC}[31m` } }),
    );
    const edited = (await listed()).get(globex.session)!;
    assert.equal(edited["tenant"], null);
    assert.deepEqual(edited["labels"], {});
    const editedTable = await cli(["sessions"]);
    assert.doesNotMatch(editedTable.stdout, UNSAFE);

    for (const bad of [
      ["--tenant", `acme${ESC}[2J`],
      ["--tenant", ""],
      ["--label", "team"],
      ["--label", "Team=x"],
    ]) {
      const refused = await cli(["sessions", ...bad]);
      assert.equal(refused.code, 2, `${JSON.stringify(bad)}: ${refused.stdout}`);
      assert.doesNotMatch(refused.stderr, UNSAFE);
    }
  } finally {
    await producer.close();
  }
});
