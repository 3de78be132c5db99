import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  InvalidPrefixError,
  InvalidSessionIdError,
  createEventLog,
  envelopeSchema,
  isValidSessionId,
  parseBatchId,
  sessionKeys,
} from "../../src/log/index.ts";
import type { RedisClient } from "../../src/log/index.ts";

describe("keys and validation", () => {
  it("accepts UUIDs and simple ids, rejects anything that could break the hash tag", () => {
    assert.ok(isValidSessionId("0d6c4a52-3b1e-4f7a-9a8e-5c2d1b0e9f11"));
    assert.ok(isValidSessionId("a.b_c-1"));
    for (const bad of ["", "{x}", "a}b", "a:b", "a b", "-lead", "x".repeat(129), "ünï"]) {
      assert.equal(isValidSessionId(bad), false, bad);
      assert.throws(() => sessionKeys("ts:", bad), InvalidSessionIdError);
    }
  });

  it("every key of a session hashes by the same {s:<id>} tag, whatever the valid id", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$/), (id) => {
        const keys = sessionKeys("pre:fix:", id);
        for (const key of [keys.events, keys.meta, keys.blobs, keys.blob("ab")]) {
          const open = key.indexOf("{");
          assert.equal(key.slice(open + 1, key.indexOf("}", open)), `s:${id}`);
          assert.ok(key.startsWith("pre:fix:{"));
        }
      }),
    );
  });

  it("rejects a prefix with braces", () => {
    assert.throws(() => createEventLog({ redis: {} as RedisClient, prefix: "t{1}:" }), InvalidPrefixError);
  });

  it("batch ids are <writer>:<n>", () => {
    assert.deepEqual(parseBatchId("w-abc:12"), { writer: "w-abc", n: 12 });
    for (const bad of ["w", "w:0", ":1", "w:x", "a b:1"]) assert.throws(() => parseBatchId(bad), /batch id/);
  });

  it("envelope schema: versioned, dotted kinds, cli.line needs the raw text", () => {
    const ok = {
      v: 1,
      seq: 1,
      session: "s",
      turn: "t",
      attempt: 1,
      epoch: 1,
      at: new Date().toISOString(),
      kind: "cli.line",
      data: { raw: "" },
    };
    assert.ok(envelopeSchema.safeParse(ok).success);
    assert.ok(envelopeSchema.safeParse({ ...ok, kind: "some.new.kind", data: null }).success);
    assert.equal(envelopeSchema.safeParse({ ...ok, v: 2 }).success, false);
    assert.equal(envelopeSchema.safeParse({ ...ok, kind: "Cli.Line" }).success, false);
    assert.equal(envelopeSchema.safeParse({ ...ok, data: { raw: 1 } }).success, false);
    assert.equal(envelopeSchema.safeParse({ ...ok, seq: 0 }).success, false);
  });
});
