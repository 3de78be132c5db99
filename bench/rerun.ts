// A recorded 10-tool turn re-run (`turnstream rerun`) against the same turn run fresh through a worker
// on the scripted model server; ratio = re-run seconds / fresh seconds, best of a few rounds each.
// `npm run bench -- rerun [rounds]`
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { rig } from "../test/worker/_more.ts";
import { turnstream } from "../test/bin/_cli.ts";

const ROUNDS = Number(process.argv[2] ?? 3);
const r = await rig((ws: string) => ({
  responses: [
    ...Array.from({ length: 5 }, (_, i) => ({ content: [{ type: "tool_use", name: "Read", input: { file_path: join(ws, `f${i}.txt`) } }, { type: "tool_use", name: "Bash", input: { command: `cat f${i}.txt` } }] })),
    { content: [{ type: "text", text: "read them all" }] },
  ],
}));
try {
  for (let i = 0; i < 5; i++) writeFileSync(join(r.ws, `f${i}.txt`), `file ${i}\n`);
  r.worker({ sandboxed: true, retry: { maxAttempts: 1 } });
  const fresh: number[] = [];
  let session = "";
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = performance.now();
    const q = await r.producer.enqueueTurn({ prompt: "Read the five files.", cwd: r.ws, options: { skipPermissions: true } });
    await r.producer.waitForTurn(q.turn, { session: q.session, timeoutMs: 120_000 });
    fresh.push((performance.now() - t0) / 1000);
    session = q.session;
  }
  const rerun: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = performance.now();
    const out = await turnstream(["rerun", session, "--prefix", r.space.logPrefix, "--json"], {}, 120_000);
    if (out.code !== 0) throw new Error(`rerun exited ${out.code}: ${out.stdout}${out.stderr}`);
    rerun.push((performance.now() - t0) / 1000);
  }
  const best = (xs: number[]): number => Math.min(...xs);
  process.stdout.write(`fresh turn (10 tools): ${fresh.map((s) => s.toFixed(2)).join(" ")} s\nrerun command:         ${rerun.map((s) => s.toFixed(2)).join(" ")} s\n`);
  process.stdout.write(`${JSON.stringify({ bench: "rerun", tools: 10, freshSeconds: best(fresh), rerunSeconds: best(rerun), ratio: Number((best(rerun) / best(fresh)).toFixed(3)) })}\n`);
} finally {
  await r.dispose();
}
