// docs/reference/ is generated from the code (`npm run docs`, scripts/gen-reference.ts): regenerating
// it here and comparing catches a command, flag, variable, metric or exit code changed without the
// reference, and a hand edit of a generated file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { generatedReferences, REFERENCE_DIR } from "../../scripts/gen-reference.ts";

test("every file in docs/reference/ is what `npm run docs` writes today", async () => {
  const generated = await generatedReferences();
  assert.ok(generated.size >= 4);
  for (const [file, content] of generated) {
    const path = join(REFERENCE_DIR, file);
    assert.ok(existsSync(path), `docs/reference/${file} is missing: run npm run docs`);
    assert.equal(readFileSync(path, "utf8"), content, `docs/reference/${file} is stale: run npm run docs`);
  }
  assert.deepEqual(readdirSync(REFERENCE_DIR).sort(), [...generated.keys()].sort(), "a file nothing generates");
});

test("the generated references name every command, variable and exit code", async () => {
  const generated = await generatedReferences();
  assert.match(generated.get("cli.md")!, /^## run$/m);
  assert.match(generated.get("cli.md")!, /--prompt-file FILE/);
  assert.match(generated.get("configuration.md")!, /^\| `TURNSTREAM_WORKSPACE_ROOTS` \|/m);
  assert.match(generated.get("configuration.md")!, /^## Internal$/m);
  assert.match(generated.get("configuration.md")!, /^- `TURNSTREAM_LEASE_MS`: unset it; .*leaseMs$/m);
  assert.match(generated.get("metrics.md")!, /`turnstream_turns_ended_total`/);
  assert.match(generated.get("exit-codes.md")!, /^\| 3 \| `infrastructure` \|/m);
});
