// A loopback TCP proxy whose upstream can be switched: clients keep one address while the server
// behind it changes, as they would behind a failover's virtual IP or DNS name. Switching cuts every
// open connection, so clients reconnect and reach the new upstream.
import { connect, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  readonly port: number;
  readonly url: string;
  /** Sends new connections to `port` and cuts the open ones. */
  switchTo(port: number): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, host = "127.0.0.1"): Promise<TcpProxy> {
  let target = targetPort;
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const server: Server = createServer((client) => {
    const upstream = connect(target, host);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as { port: number }).port;
  const cutAll = (): void => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    port,
    url: `redis://${host}:${port}`,
    switchTo(next: number) {
      target = next;
      cutAll();
    },
    close() {
      cutAll();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
