// The gzip JSONL folder store: byte-for-byte round trips, idempotence, conflicts, a put that fails
// half-way, and files edited after they were written (an archive file is untrusted input).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import {
  ArchiveConflictError,
  ArchiveCopyTooLargeError,
  ArchiveCorruptError,
  FileArchive,
  InvalidSessionCopyError,
  logDigest,
} from "../../src/archive/index.ts";
import { InvalidSessionIdError, type Envelope } from "../../src/log/index.ts";
import { assertHoldsCopy, copyOf, loggedEvents, readTexts, uniqueId } from "./_support.ts";

let root: string;
let session: string;
let events: Envelope[];

/** The bytes of a copy's event lines as the file holds them decompressed (each line and its newline). */
function copyBytes(copy: ReturnType<typeof copyOf>): number {
  return copy.events.reduce((sum, event) => sum + Buffer.byteLength(JSON.stringify(event)) + 1, 0);
}

function freshArchive(options = {}): FileArchive {
  return new FileArchive(mkdtempSync(join(root, "dir-")), options);
}

function fileOf(archive: FileArchive, id = session): string {
  return join(archive.dir, `${id}.jsonl.gz`);
}

/** Rewrites an archive file's lines (header = index 0) as someone with access to the folder could. */
function editLines(path: string, edit: (lines: string[]) => void): void {
  const lines = gunzipSync(readFileSync(path)).toString("utf8").split("\n");
  edit(lines);
  writeFileSync(path, gzipSync(lines.join("\n")));
}

async function readError(archive: FileArchive, id = session): Promise<ArchiveCorruptError> {
  try {
    await readTexts(archive.read(id));
  } catch (err) {
    assert.ok(err instanceof ArchiveCorruptError, String(err));
    return err;
  }
  assert.fail("the read was not refused");
}

describe("FileArchive", () => {
  before(async () => {
    root = mkdtempSync(join(tmpdir(), "ts-archive-"));
    session = uniqueId("fa");
    events = await loggedEvents("today-session", session);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it("migrate creates the folder; a copy reads back byte for byte with its state and summary", async () => {
    const archive = new FileArchive(join(root, "new", "folder"));
    assert.equal((await archive.migrate()).applied.length, 1);
    assert.deepEqual((await archive.migrate()).applied, []);
    const copy = copyOf(session, events);
    await archive.put(copy);
    await assertHoldsCopy(archive, copy);
    const header = JSON.parse(
      gunzipSync(readFileSync(fileOf(archive)))
        .toString("utf8")
        .split("\n")[0]!,
    );
    assert.equal(header.turnstreamArchive, 1);
    assert.equal(header.session, session);
    assert.deepEqual(
      await readTexts(archive.read(session, { fromSeq: 3, toSeq: 5 })),
      events.slice(2, 5).map((event) => JSON.stringify(event)),
    );
    const listed: string[] = [];
    for await (const id of archive.sessions()) listed.push(id);
    assert.deepEqual(listed, [session]);
    assert.equal(await archive.digest("never-archived"), undefined);
    assert.equal(await archive.summary("never-archived"), undefined);
    assert.equal(await archive.record("never-archived"), undefined);
    assert.deepEqual(await readTexts(archive.read("never-archived")), []);
    assert.equal(archive.location, `file://${archive.dir}`);
  });

  it("a header larger than the start of the file that is read for it comes back whole", async () => {
    const archive = freshArchive();
    const copy = copyOf(session, events);
    // Random ids do not compress: the header runs well past the first prefix read for it.
    const registered = Object.fromEntries(
      Array.from({ length: 3000 }, () => [randomBytes(12).toString("hex"), randomBytes(8).toString("hex")]),
    );
    const state = { ...copy.state, registered };
    await archive.put({ ...copy, state });
    assert.deepEqual(await archive.state(session), state);
    assert.deepEqual(await archive.summary(session), copy.summary);
    assert.deepEqual(await archive.record(session), { state, summary: copy.summary });
    assert.equal((await readTexts(archive.read(session))).length, events.length);
  });

  it("putting the same copy again changes nothing; a different history is refused", async () => {
    const archive = freshArchive();
    await archive.put(copyOf(session, events));
    const before = statSync(fileOf(archive));
    await archive.put(copyOf(session, events));
    const again = statSync(fileOf(archive));
    assert.equal(again.ino, before.ino, "the file was not rewritten");
    assert.equal(again.mtimeMs, before.mtimeMs);
    const other = events.map((event) => (event.seq === 4 ? { ...event, at: "2030-01-01T00:00:00.000Z" } : event));
    await assert.rejects(archive.put(copyOf(session, other)), ArchiveConflictError);
    await assert.rejects(archive.put(copyOf(session, events, events.length - 3)), ArchiveConflictError);
    assert.deepEqual(await archive.digest(session), logDigest(events));
  });

  it("a copy that extends the stored one replaces it", async () => {
    const archive = freshArchive();
    await archive.put(copyOf(session, events, 20));
    assert.equal((await archive.digest(session))?.count, 20);
    await archive.put(copyOf(session, events));
    assert.deepEqual(await archive.digest(session), logDigest(events));
    assert.equal((await readTexts(archive.read(session))).length, events.length);
  });

  it("refuses a copy that disagrees with itself, and session ids that are not ids", async () => {
    const archive = freshArchive();
    const copy = copyOf(session, events);
    await assert.rejects(archive.put({ ...copy, digest: logDigest(events.slice(1)) }), InvalidSessionCopyError);
    await assert.rejects(archive.put({ ...copy, events: events.slice(1) }), InvalidSessionCopyError);
    await assert.rejects(archive.put(copyOf("someone-else", events)), InvalidSessionCopyError);
    await assert.rejects(archive.digest("../../etc/passwd"), InvalidSessionIdError);
    await assert.rejects(readTexts(archive.read("../x")), InvalidSessionIdError);
    assert.deepEqual(readdirSync(archive.dir), []);
  });

  it("a put that fails after writing its temporary file leaves the old copy, no debris, and a retry completes", async () => {
    let failing = true;
    const archive = freshArchive({
      beforeRename: (temp: string) => {
        assert.ok(existsSync(temp));
        if (failing) throw new Error("injected: the machine stops before the rename");
      },
    });
    await assert.rejects(archive.put(copyOf(session, events, 10)), /injected/);
    assert.deepEqual(readdirSync(archive.dir), [], "nothing half-written, not even the temporary file");
    assert.equal(await archive.digest(session), undefined);
    failing = false;
    await archive.put(copyOf(session, events, 10));
    failing = true;
    await assert.rejects(archive.put(copyOf(session, events)), /injected/);
    assert.deepEqual(await archive.digest(session), logDigest(events.slice(0, 10)), "the old copy stands");
    assert.deepEqual(readdirSync(archive.dir), [`${session}.jsonl.gz`]);
    failing = false;
    await archive.put(copyOf(session, events));
    assert.deepEqual(await archive.digest(session), logDigest(events));
  });

  it("a temporary file a crashed put left is never listed and migrate removes it once stale", async () => {
    const archive = freshArchive();
    await archive.put(copyOf(session, events));
    const debris = join(archive.dir, `.tmp-${session}-0123456789ab`);
    writeFileSync(debris, "half a copy");
    const listed: string[] = [];
    for await (const id of archive.sessions()) listed.push(id);
    assert.deepEqual(listed, [session]);
    await archive.migrate();
    assert.ok(existsSync(debris), "a recent one may be a put in progress");
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    utimesSync(debris, old, old);
    await archive.migrate();
    assert.ok(!existsSync(debris));
  });

  describe("an edited file is refused on read and its digest shows it", () => {
    const cases: Array<{ name: string; edit: (lines: string[]) => void; says: RegExp; position?: string }> = [
      {
        name: "a changed seq",
        edit: (lines) => {
          lines[5] = lines[5]!.replace(/"seq":5,/, '"seq":50,');
        },
        says: /seq 50 where 5 belongs/,
        position: "line 6",
      },
      {
        name: "another session's envelope",
        edit: (lines) => {
          const envelope = JSON.parse(lines[3]!) as Envelope;
          lines[3] = JSON.stringify({ ...envelope, session: "someone-else" });
        },
        says: /another session/,
        position: "line 4",
      },
      {
        name: "a key added to an envelope",
        edit: (lines) => {
          lines[2] = lines[2]!.replace(/}$/, ',"extra":1}');
        },
        says: /not the text the archive wrote/,
        position: "line 3",
      },
      {
        name: "text edited so every line stays valid",
        edit: (lines) => {
          const index = lines.findIndex((line) => line.includes('"kind":"turn.queued"'));
          const envelope = JSON.parse(lines[index]!) as Envelope & { data: { prompt: string } };
          envelope.data.prompt = "rm -rf / (an instruction nobody gave)";
          lines[index] = JSON.stringify(envelope);
        },
        says: /digest to .* header says/,
      },
      {
        name: "a line that is not JSON",
        edit: (lines) => {
          lines[7] = "{not json";
        },
        says: /not JSON/,
        position: "line 8",
      },
      {
        name: "a header of another session",
        edit: (lines) => {
          const header = JSON.parse(lines[0]!) as Record<string, unknown>;
          lines[0] = JSON.stringify({ ...header, session: "someone-else" });
        },
        says: /header is of session someone-else/,
        position: "line 1",
      },
    ];
    for (const { name, edit, says, position } of cases) {
      it(name, async () => {
        const archive = freshArchive();
        await archive.put(copyOf(session, events));
        editLines(fileOf(archive), edit);
        const err = await readError(archive);
        assert.match(err.message, says);
        assert.ok(err.message.includes(fileOf(archive)), "the message names the file");
        assert.equal(err.position, position);
        if (!name.includes("header")) assert.notDeepEqual(await archive.digest(session), logDigest(events));
      });
    }

    it("bytes that are not UTF-8 in an event line", async () => {
      const archive = freshArchive();
      await archive.put(copyOf(session, events));
      const text = gunzipSync(readFileSync(fileOf(archive)));
      const at = text.indexOf('"kind":"turn.queued"');
      text[at + 1] = 0xff;
      writeFileSync(fileOf(archive), gzipSync(text));
      assert.match((await readError(archive)).message, /not UTF-8/);
    });

    it("an edit past the seqs asked for still refuses the read, before anything is handed out", async () => {
      const archive = freshArchive();
      await archive.put(copyOf(session, events));
      editLines(fileOf(archive), (lines) => {
        const last = JSON.parse(lines.at(-2)!) as Envelope;
        lines[lines.length - 2] = JSON.stringify({ ...last, at: "2000-01-01T00:00:00.000Z" });
      });
      const handedOut: Envelope[] = [];
      await assert.rejects(async () => {
        for await (const envelope of archive.read(session, { toSeq: 2 })) handedOut.push(envelope);
      }, /digest to .* header says/);
      assert.deepEqual(handedOut, []);
    });

    it("a file that is not gzip, or is cut short", async () => {
      const archive = freshArchive();
      await archive.put(copyOf(session, events));
      const bytes = readFileSync(fileOf(archive));
      writeFileSync(fileOf(archive), bytes.subarray(0, bytes.length - 40));
      assert.match((await readError(archive)).message, /unreadable as gzip/);
      await assert.rejects(archive.digest(session), ArchiveCorruptError);
      writeFileSync(fileOf(archive), "plain text");
      await assert.rejects(archive.summary(session), ArchiveCorruptError);
      await assert.rejects(archive.record(session), ArchiveCorruptError);
    });

    it("a copy larger than a read could take back is refused before anything is written", async () => {
      const copy = copyOf(session, events);
      // The events alone already exceed the cap; the header line comes on top.
      const cap = copyBytes(copy) - 1;
      const archive = freshArchive({ maxDecompressedBytes: cap });
      await assert.rejects(archive.put(copy), (err: unknown) => {
        assert.ok(err instanceof ArchiveCopyTooLargeError, String(err));
        assert.match(err.message, new RegExp(`more than this file archive reads back \\(${cap}\\)`));
        return true;
      });
      assert.equal(await archive.digest(session), undefined, "nothing was written");
      const roomy = freshArchive({ maxDecompressedBytes: cap + 64 * 1024 });
      await roomy.put(copy);
      assert.equal((await readTexts(roomy.read(session))).length, events.length, "what fits reads back");
    });

    it("a gzip bomb (a small file that expands past the cap) is refused, never decompressed whole", async () => {
      // Big enough that the first few KB read for a header (which expand to about 4 MB) fit under it.
      const cap = 8 * 1024 * 1024;
      const archive = freshArchive({ maxDecompressedBytes: cap });
      const copy = copyOf(session, events);
      await archive.put(copy);
      assert.equal((await readTexts(archive.read(session))).length, events.length);
      const header = gunzipSync(readFileSync(fileOf(archive)))
        .toString("utf8")
        .split("\n")[0]!;
      const expansion = Buffer.alloc(2 * cap, "x");
      const bomb = (text: string | Buffer): Buffer => gzipSync(text, { level: 9 });
      const refusal = new RegExp(`${fileOf(archive)}: it decompresses to more than ${cap} bytes`);

      // After a genuine header: the header alone still reads, the events are refused.
      writeFileSync(fileOf(archive), bomb(Buffer.concat([Buffer.from(`${header}\n`), expansion])));
      assert.ok(statSync(fileOf(archive)).size < cap / 256, "the bomb is a small file");
      assert.deepEqual(await archive.summary(session), copy.summary);
      assert.match((await readError(archive)).message, refusal);
      await assert.rejects(archive.digest(session), refusal);

      // As the first line: the header read is refused too, and a listing reports it as corrupt.
      writeFileSync(fileOf(archive), bomb(expansion));
      await assert.rejects(archive.summary(session), refusal);
      await assert.rejects(archive.record(session), refusal);
      await assert.rejects(archive.put(copy), refusal);
      const corrupt: ArchiveCorruptError[] = [];
      assert.deepEqual(await archive.summaries({ onCorrupt: (err) => corrupt.push(err) }), []);
      assert.match(corrupt[0]?.message ?? "", refusal);
    });
  });
});
