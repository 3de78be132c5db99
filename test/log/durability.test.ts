// Durability levels against real redis-servers: replicas:N confirms each batch with WAIT (the replica
// holds it the moment the append is acknowledged; without a replica the writer stops with a clear
// error instead of retrying forever), fsync on Redis < 7.2 is refused unless appendfsync is always,
// and the settings and Sentinel URLs refuse malformed (attacker) values by name.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import {
  checkDurability,
  connectRedis,
  createEventLog,
  createWriter,
  DurabilityError,
  parseDurability,
  redisAddress,
  redisUrlForDisplay,
  type Durability,
} from "../../src/log/index.ts";
import { sentinelOptions } from "../../src/log/redis.ts";
import { startRedisServer } from "../support/redis-server.ts";
import { waitUntil } from "../worker/_support.ts";

const line = (i: number) => ({ turn: "t1", attempt: 1, kind: "cli.line", data: { raw: `{"type":"x","i":${i}}` } });

test("TURNSTREAM_DURABILITY: the three levels are read, anything else is refused by name", () => {
  assert.deepEqual(parseDurability(undefined), { level: "memory" });
  assert.equal(parseDurability("replicas:2").level, "replicas");
  assert.equal((parseDurability("replicas:2") as { replicas: number }).replicas, 2);
  assert.equal(parseDurability("fsync").level, "fsync");
  for (const bad of [
    "replicas:0",
    "replicas:1;FLUSHALL",
    "REPLICAS:1",
    "replicas:",
    "replicas:100",
    "disk",
    "memory\nfsync",
  ]) {
    assert.throws(() => parseDurability(bad), /TURNSTREAM_DURABILITY=.* is not a durability level: use memory/, bad);
  }
});

test(
  "replicas:1: an acknowledged batch is already on the replica; with no replica the writer stops with DurabilityError",
  { timeout: 60_000 },
  async (context) => {
    const primary = await startRedisServer();
    const replica = await startRedisServer({ args: ["--replicaof", "127.0.0.1", String(primary.port)] });
    const redis = connectRedis({ url: primary.url, env: {} });
    const onReplica = new Redis(replica.url);
    onReplica.on("error", () => undefined); // the replica is killed on purpose below
    context.after(async () => {
      redis.disconnect();
      onReplica.disconnect();
      await Promise.all([primary.dispose(), replica.dispose()]);
    });
    await waitUntil(
      async () => (await onReplica.info("replication")).includes("master_link_status:up"),
      15000,
      "the replica in sync",
    );
    const level: Durability = { level: "replicas", replicas: 1, timeoutMs: 200, tries: 2 };
    const log = createEventLog({ redis, prefix: "dur:", durability: level });
    const { epoch } = await log.beginAttempt("s1", "t1");
    const writer = createWriter({ log, session: "s1", epoch });
    for (let index = 0; index < 50; index++) await writer.write(line(index));
    const seq = await writer.flush();
    // Read at once, without waiting: WAIT acknowledged it only once the replica held it.
    assert.equal(await onReplica.xlen(log.keys("s1").events), seq);

    // The replica goes: the next batch is applied on the primary but not confirmed → a clear failure.
    await replica.stop("SIGKILL");
    await writer.write(line(50));
    const err = await writer.flush().then(
      () => assert.fail("flush resolved without a replica"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof DurabilityError, String(err));
    assert.equal(err.problem, "replicas_timeout");
    assert.match(
      err.message,
      /replicas:1: only 0 replica\(s\) confirmed the append within 400 ms; check that the primary has 1 connected/,
    );
    assert.equal(writer.failure, err);
  },
);

test(
  "fsync on Redis < 7.2: refused unless appendonly yes and appendfsync always, and then appends work",
  { timeout: 60_000 },
  async (context) => {
    const plain = await startRedisServer();
    const everysec = await startRedisServer({ args: ["--appendonly", "yes", "--appendfsync", "everysec"] });
    const always = await startRedisServer({ args: ["--appendonly", "yes", "--appendfsync", "always"] });
    const clients = [plain, everysec, always].map((s) => connectRedis({ url: s.url, env: {} }));
    context.after(async () => {
      for (const client of clients) client.disconnect();
      await Promise.all([plain.dispose(), everysec.dispose(), always.dispose()]);
    });
    const version = /redis_version:(\d+)\.(\d+)/.exec(await clients[0]!.info("server"))!;
    const hasWaitAof = Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 2);
    const fsync = parseDurability("fsync");
    if (hasWaitAof) {
      assert.equal(await checkDurability(clients[0]!, fsync), "waitaof");
    } else {
      for (const [client, aof, mode] of [
        [clients[0]!, "no", "everysec"],
        [clients[1]!, "yes", "everysec"],
      ] as const) {
        const err = await checkDurability(client, fsync).then(
          () => assert.fail("accepted"),
          (e: unknown) => e,
        );
        assert.ok(err instanceof DurabilityError);
        assert.equal(err.problem, "unsupported");
        assert.match(
          err.message,
          new RegExp(
            `has no WAITAOF \\(7\\.2\\+\\), and its appendonly is "${aof}", appendfsync "${mode}"; set appendonly yes and appendfsync always`,
          ),
        );
      }
      assert.equal(await checkDurability(clients[2]!, fsync), "always");
      // The same refusal reaches a writer that appends without a start-up check.
      const log = createEventLog({ redis: clients[0]!, prefix: "dur:", durability: fsync });
      const { epoch } = await log.beginAttempt("s2", "t1");
      const writer = createWriter({ log, session: "s2", epoch });
      await writer.write(line(0));
      await assert.rejects(writer.flush(), DurabilityError);
    }
    const log = createEventLog({ redis: clients[2]!, prefix: "dur:", durability: fsync });
    const { epoch } = await log.beginAttempt("s3", "t1");
    const writer = createWriter({ log, session: "s3", epoch });
    for (let index = 0; index < 10; index++) await writer.write(line(index));
    assert.equal(await writer.close(), 10);
  },
);

test("redis-sentinel:// URLs: sentinels and primary name read, malformed ones refused by name, the password never shown", () => {
  const options = sentinelOptions("redis-sentinel://app:s3cr%40t@127.0.0.1:26379,10.0.0.2:26380/mymaster?db=3");
  assert.deepEqual(options.sentinels, [
    { host: "127.0.0.1", port: 26379 },
    { host: "10.0.0.2", port: 26380 },
  ]);
  assert.equal(options.name, "mymaster");
  assert.equal(options.username, "app");
  assert.equal(options.password, "s3cr@t");
  assert.equal(options.db, 3);
  const client = connectRedis({
    url: "redis-sentinel://app:s3cr%40t@127.0.0.1:1/mymaster",
    env: {},
    redisOptions: { lazyConnect: true },
  });
  assert.equal(redisAddress(client), "redis-sentinel://127.0.0.1:1/mymaster");
  const shown = redisUrlForDisplay({
    REDIS_URL: "redis-sentinel://app:s3cr%40t@127.0.0.1:26379,10.0.0.2:26380/mymaster?db=3",
  });
  assert.equal(shown, "redis-sentinel://127.0.0.1:26379,10.0.0.2:26380/mymaster");
  client.disconnect();
  const bad: [string, RegExp][] = [
    ["redis-sentinel://127.0.0.1:26379", /ends with \/<primary name>/],
    ["redis-sentinel://127.0.0.1:26379/my{master}", /ends with \/<primary name>/],
    ["redis-sentinel:///mymaster", /lists at least one sentinel/],
    ["redis-sentinel://127.0.0.1/mymaster", /sentinel "127.0.0.1" is not host:port/],
    ["redis-sentinel://127.0.0.1:99999/mymaster", /is not host:port/],
    ["redis-sentinel://127.0.0.1:26379/mymaster?db=1%0d%0aFLUSHALL", /db=.* is not a database number/],
  ];
  for (const [url, message] of bad) assert.throws(() => connectRedis({ url, env: {} }), message, url);
});
