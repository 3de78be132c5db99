// Reading a stored entry's head (turn, attempt, epoch, at, kind) without parsing its data: it must
// agree with the full parse for whatever encode() writes, odd turn ids included, and decline any
// other shape so the caller parses the entry whole.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { connectRedis, createEventLog, storedEnvelope, storedHead } from "../../src/log/index.ts";

const redis = connectRedis({ url: "redis://127.0.0.1:6379" });
const log = createEventLog({ redis, prefix: "tshead:" });
after(() => redis.disconnect());

test("property: the head read from encode()'s text is the full parse's", () => {
  fc.assert(
    fc.property(
      fc.string({ maxLength: 200 }),
      fc.nat(1000),
      fc.nat(1_000_000),
      fc.constantFrom("cli.line", "session.snapshot", "turn.finished", "a_b.c_d"),
      fc.jsonValue(),
      (turn, attempt, epoch, kind, data) => {
        const enc = log.encode("s-1", epoch, {
          turn,
          attempt,
          kind,
          at: "2026-12-03T09:00:00.000Z",
          data: kind === "cli.line" ? { raw: JSON.stringify(data) } : data,
        });
        const full = JSON.parse(enc.env) as Record<string, unknown>;
        assert.deepEqual(storedHead(enc.env), {
          turn: full["turn"],
          attempt: full["attempt"],
          epoch: full["epoch"],
          at: full["at"],
          kind: full["kind"],
        });
      },
    ),
    { numRuns: 500 },
  );
});

test("other shapes are declined; the envelope field is found among an entry's fields", () => {
  assert.equal(storedHead(undefined), undefined);
  assert.equal(storedHead('{"turn":"t","v":1,"attempt":1,"epoch":1,"at":"x","kind":"cli.line"}'), undefined);
  assert.equal(storedHead('{"v":1,"turn":"t","attempt":1,"epoch":1,"at":"x","kind":"cli.\\u006cine"}'), undefined);
  assert.equal(storedEnvelope(["r", "raw text", "e", "{}"]), "{}");
  assert.equal(storedEnvelope(["r", "raw text"]), undefined);
});
