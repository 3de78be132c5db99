// `turnstream status` and `turnstream tenants` while a real worker runs a tenant's turn under limits
// the operator set with `tenants set`: the worker takes the signed limits (the turn runs), status
// lists the running turn with its tenant and the tenant's running turns and spend against its
// budget (text and --json), `--tenant` narrows the tenants and running turns but not the queue
// counts, and `tenants --json` shows the same figures. Once the turn ends, its slot is free and its
// model calls' cost is what the tenant spent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TenantRow } from "../../src/tenants/index.ts";
import { OPERATOR, operatorKeyFile } from "../support/operator-keys.ts";
import { dataOf, rig } from "../worker/_more.ts";
import { waitUntil } from "../worker/_support.ts";
import { onlyJson, turnstream } from "./_cli.ts";

type StatusJson = {
  counts: Record<string, number>;
  running: { session: string; turn: string; tenant: string | null }[];
  tenants: TenantRow[];
  warnings: string[];
};

test("status shows a running tenant turn and its tenant's spend against its budget; --tenant narrows; tenants --json agrees", async () => {
  const stage = await rig((ws: string) => ({
    responses: [
      {
        content: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: `while [ ! -e ${join(ws, "go")} ]; do sleep 0.1; done`, description: "wait for go" },
          },
        ],
        usage: { input_tokens: 1000, output_tokens: 100 },
      },
      { content: [{ type: "text", text: "done" }], usage: { input_tokens: 1000, output_tokens: 10 } },
    ],
  }));
  const keyFile = operatorKeyFile(stage.space.dir("operator"));
  const env = {
    TURNSTREAM_PREFIX: stage.space.logPrefix,
    TURNSTREAM_QUEUE_PREFIX: stage.space.queuePrefix,
    TURNSTREAM_OPERATOR_KEYS: OPERATOR.publicKey,
    TURNSTREAM_OPERATOR_KEY: keyFile,
  };
  try {
    const set = await turnstream(
      ["tenants", "set", "acme/api", "--budget-usd", "5", "--max-running", "2", "--by", "dana"],
      env,
    );
    assert.equal(set.code, 0, set.stderr);
    stage.worker({ operatorKeys: [OPERATOR.publicKey], toolSandbox: { mode: "off" } });
    const queued = await stage.producer.enqueueTurn({ prompt: "wait", cwd: stage.ws, tenant: "acme/api" });
    // The first model call is answered and counted; the turn now waits in its tool, holding its slot.
    await waitUntil(
      async () => {
        const calls = (await stage.events(queued.session, queued.turn)).filter((e) => e.kind === "model.call");
        return calls.length === 1;
      },
      60_000,
      "the turn's first model call",
    );
    const firstCost = (await stage.events(queued.session, queued.turn))
      .filter((e) => e.kind === "model.call")
      .reduce((sum, e) => sum + (dataOf(e)["costUsd"] as number), 0);
    assert.ok(firstCost > 0);

    let report: StatusJson | undefined;
    await waitUntil(
      async () => {
        report = onlyJson((await turnstream(["status", "--json"], env)).stdout) as StatusJson;
        return report.tenants[0]?.spentUsd !== 0;
      },
      30_000,
      "the first call's cost counted",
    );
    assert.equal(report!.counts["active"], 1);
    assert.deepEqual(
      report!.running.map(({ session, turn, tenant }) => ({ session, turn, tenant })),
      [{ session: queued.session, turn: queued.turn, tenant: "acme/api" }],
    );
    const [row] = report!.tenants;
    assert.equal(report!.tenants.length, 1);
    assert.deepEqual(
      {
        tenant: row!.tenant,
        running: row!.running,
        maxRunning: row!.maxRunning,
        budgetUsd: row!.budgetUsd,
        overBudget: row!.overBudget,
        limits: row!.limits,
        setBy: row!.setBy,
      },
      {
        tenant: "acme/api",
        running: 1,
        maxRunning: 2,
        budgetUsd: 5,
        overBudget: false,
        limits: "verified",
        setBy: "dana",
      },
    );
    // Counted once, rounded up to the micro-USD.
    assert.ok(row!.spentUsd >= firstCost && row!.spentUsd - firstCost < 1e-5, `${row!.spentUsd} vs ${firstCost}`);

    const text = await turnstream(["status"], env);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(
        `^running: session ${queued.session} turn ${queued.turn} attempt 1 since \\S+ \\(tenant acme/api\\)$`,
        "m",
      ),
    );
    assert.match(text.stdout, /^tenants: 1 \(`turnstream tenants` shows their limits\)$/m);
    assert.match(
      text.stdout,
      /^ {2}acme\/api: 1 running \(at most 2\), \$0\.\d\d of \$5\.00 \(\d+(\.\d)?%\) spent in 24 h, over budget: no$/m,
    );

    // Another tenant: nothing of acme's, and the queue's counts, which stay the whole queue's.
    const other = onlyJson((await turnstream(["status", "--json", "--tenant", "beta"], env)).stdout) as StatusJson;
    assert.deepEqual(other.running, []);
    assert.deepEqual(
      other.tenants.map((r) => [r.tenant, r.running, r.spentUsd, r.limits]),
      [["beta", 0, 0, "none"]],
    );
    assert.equal(other.counts["active"], 1);
    assert.match(
      (await turnstream(["status", "--tenant", "beta"], env)).stdout,
      /^queue \(all tenants\): 0 waiting, 1 active/m,
    );

    // The tenants listing shows the same row.
    const listed = onlyJson((await turnstream(["tenants", "--json"], env)).stdout) as { tenants: TenantRow[] };
    // The same row: no call is made while the turn waits in its tool, so nothing changed meanwhile.
    assert.deepEqual(listed.tenants, report!.tenants);

    writeFileSync(join(stage.ws, "go"), "");
    const result = await stage.producer.waitForTurn(queued.turn, { timeoutMs: 60_000 });
    assert.equal(result.status, "finished", JSON.stringify(result));
    const totalCost = (await stage.events(queued.session, queued.turn))
      .filter((e) => e.kind === "model.call")
      .reduce((sum, e) => sum + (dataOf(e)["costUsd"] as number), 0);
    let after: TenantRow | undefined;
    await waitUntil(
      async () => {
        after = (onlyJson((await turnstream(["tenants", "--json"], env)).stdout) as { tenants: TenantRow[] })
          .tenants[0];
        return after !== undefined && after.running === 0 && after.spentUsd >= totalCost;
      },
      30_000,
      "the slot freed and every call counted",
    );
    assert.ok(after!.spentUsd - totalCost < 1e-5, `${after!.spentUsd} vs ${totalCost}`);
  } finally {
    await stage.dispose();
  }
});
