// What a re-run grants is the operator's: a recorded permission mode is only ever a reason to refuse.
import { test } from "node:test";
import assert from "node:assert/strict";
import { refusalOf, type RecordedTurn } from "../../src/rerun/index.ts";

const turn = (id: string, permissionMode: string | undefined): RecordedTurn => ({
  turn: id,
  prompt: "p",
  cwd: "/recorded",
  model: undefined,
  permissionMode,
  skipPermissions: permissionMode === "bypassPermissions",
  attempt: 1,
  lines: [],
  ending: { status: "finished", errorKind: undefined, resultText: "ok" },
});

test("a turn recorded in a mode the operator did not grant is refused by name; the granted mode or the default passes", () => {
  const turns = [turn("t_a", "default"), turn("t_b", "acceptEdits"), turn("t_c", undefined)];
  const refused = refusalOf(turns, { permissionMode: "default", imported: false, session: "s1" });
  assert.match(
    refused ?? "",
    /^turn 2 \(t_b\) was recorded in permission mode "acceptEdits".*pass --permission-mode acceptEdits to re-run it so/,
  );
  assert.equal(refusalOf(turns, { permissionMode: "acceptEdits", imported: false, session: "s1" }), undefined);
  assert.match(
    refusalOf([turn("t_x", "bypassPermissions")], { permissionMode: "acceptEdits", imported: false, session: "s1" }) ??
      "",
    /"bypassPermissions"/,
  );
  assert.equal(
    refusalOf([turn("t_y", "default")], { permissionMode: "bypassPermissions", imported: false, session: "s1" }),
    undefined,
    "the operator may grant more",
  );
});

test("an imported session is granted the default mode only, whatever its recording says", () => {
  assert.equal(
    refusalOf([turn("t_a", "default")], { permissionMode: "default", imported: true, session: "s2" }),
    undefined,
  );
  assert.match(
    refusalOf([turn("t_a", "default")], { permissionMode: "acceptEdits", imported: true, session: "s2" }) ?? "",
    /session s2 was imported.*drop --permission-mode acceptEdits/,
  );
  assert.match(
    refusalOf([turn("t_b", "bypassPermissions")], { permissionMode: "default", imported: true, session: "s2" }) ?? "",
    /an imported session re-runs only in the default mode/,
  );
});
