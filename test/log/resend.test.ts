// A reply lost on the wire: the script ran, the connection died before the client saw the answer,
// and ioredis re-sent the command on reconnect (its default). A loopback proxy makes this exact
// situation happen on demand: it swallows the next reply from Redis and cuts the client off.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type Server, type Socket } from "node:net";
import { Redis } from "ioredis";
import { createEventLog, createWriter, type EventLog } from "../../src/log/index.ts";
import { rid } from "./contract.ts";

interface Proxy {
  port: number;
  /** Drop the next chunk Redis sends and close the client connection; resolves when that happened. */
  dropNextReply(): Promise<void>;
  close(): Promise<void>;
}

async function startProxy(target: { host: string; port: number }): Promise<Proxy> {
  let armed: (() => void) | undefined;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    client.on("data", (d) => upstream.write(d));
    upstream.on("data", (chunk) => {
      if (armed !== undefined) {
        const done = armed;
        armed = undefined;
        client.destroy();
        upstream.destroy();
        done();
        return;
      }
      client.write(chunk);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    dropNextReply: () => new Promise<void>((resolve) => (armed = resolve)),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("re-sent batches after a lost reply", () => {
  let proxy: Proxy;
  let redis: Redis;
  let direct: Redis;
  let log: EventLog;
  const prefix = `test:${rid()}:`;
  const sessions: string[] = [];

  before(async () => {
    const url = new URL(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    proxy = await startProxy({ host: url.hostname, port: Number(url.port || 6379) });
    redis = new Redis(proxy.port, "127.0.0.1", { retryStrategy: () => 10 });
    redis.on("error", () => {});
    direct = new Redis(url.toString());
    log = createEventLog({ redis, prefix });
  });
  after(async () => {
    const dlog = createEventLog({ redis: direct, prefix });
    for (const sessionId of sessions) await dlog.destroy(sessionId);
    await direct.del(`${prefix}sessions`);
    redis.disconnect();
    direct.disconnect();
    await proxy.close();
  });

  it("append: the automatic re-send is reported as duplicate and stored once", async () => {
    const sessionId = `s-${rid()}`;
    sessions.push(sessionId);
    const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
    const dropped = proxy.dropNextReply();
    const res = await log.append(sessionId, epoch, [{ turn: "t1", attempt, kind: "cli.line", data: { raw: "once" } }], {
      batchId: "w1:1",
    });
    await dropped;
    assert.deepEqual(res, { outcome: "duplicate", lastSeq: 1, epoch });
    assert.equal(await direct.xlen(log.keys(sessionId).events), 1);
  });

  it("writer: a lost reply mid-stream costs neither an event nor a copy", async () => {
    const sessionId = `s-${rid()}`;
    sessions.push(sessionId);
    const { epoch, attempt } = await log.beginAttempt(sessionId, "t1");
    let armedOnce = false;
    let dropped: Promise<void> | undefined;
    const writer = createWriter({
      log,
      session: sessionId,
      epoch,
      maxBatchEvents: 10,
      onAppended: () => {
        if (!armedOnce) {
          armedOnce = true;
          dropped = proxy.dropNextReply();
        }
      },
    });
    for (let index = 0; index < 100; index++)
      await writer.write({ turn: "t1", attempt, kind: "cli.line", data: { raw: String(index) } });
    assert.equal(await writer.close(), 100);
    await dropped;
    assert.equal(writer.stats.duplicates, 1, "exactly the re-sent batch was recognised");
    const entries = await direct.xrange(log.keys(sessionId).events, "-", "+");
    assert.equal(entries.length, 100);
    const raws: string[] = [];
    for await (const event of createEventLog({ redis: direct, prefix }).read(sessionId))
      raws.push((event.data as { raw: string }).raw);
    assert.deepEqual(
      raws,
      Array.from({ length: 100 }, (_, i) => String(i)),
    );
  });
});
