// A real OTLP/HTTP receiver on loopback for tests: records every raw request body (protobuf or
// JSON, gunzipped when compressed) and answers like a collector. Point OTEL_EXPORTER_OTLP_ENDPOINT at
// `receiver.url`. Search `bodyText` for canaries: protobuf keeps strings as UTF-8 bytes too.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

export interface OtlpRequest {
  readonly path: string;
  readonly contentType: string;
  readonly headers: IncomingHttpHeaders;
  /** Decompressed body. */
  readonly body: Buffer;
  readonly bodyText: string;
  /** Parsed body for http/json requests, else undefined. */
  readonly json: unknown;
}

export interface OtlpReceiver {
  /** Base URL, e.g. http://127.0.0.1:43123 (exporters append /v1/traces). */
  readonly url: string;
  readonly requests: readonly OtlpRequest[];
  /** Resolves with the first request (already received or future) that satisfies `pred`. */
  waitFor(pred: (request: OtlpRequest) => boolean, timeoutMs?: number): Promise<OtlpRequest>;
  /** Span names in JSON requests received so far. */
  jsonSpanNames(): string[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const requests: OtlpRequest[] = [];
  const waiters = new Set<(request: OtlpRequest) => void>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      const contentType = String(req.headers["content-type"] ?? "");
      const bodyText = body.toString("utf8");
      let json: unknown;
      if (contentType.includes("json")) {
        try {
          json = JSON.parse(bodyText);
        } catch {
          json = undefined;
        }
      }
      const request: OtlpRequest = { path: req.url ?? "", contentType, headers: req.headers, body, bodyText, json };
      requests.push(request);
      // An empty ExportTraceServiceResponse: `{}` in JSON, zero bytes in protobuf.
      if (contentType.includes("json")) {
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } else {
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      }
      for (const waiter of waiters) waiter(request);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    waitFor(pred, timeoutMs = 10_000) {
      const found = requests.find(pred);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no matching OTLP request within ${timeoutMs} ms (${requests.length} received)`));
        }, timeoutMs);
        const waiter = (request: OtlpRequest): void => {
          if (!pred(request)) return;
          clearTimeout(timer);
          waiters.delete(waiter);
          resolve(request);
        };
        waiters.add(waiter);
      });
    },
    jsonSpanNames() {
      const names: string[] = [];
      for (const request of requests) {
        const rs = (
          request.json as
            { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name: string }> }> }> } | undefined
        )?.resourceSpans;
        for (const resourceSpan of rs ?? [])
          for (const ss of resourceSpan.scopeSpans ?? []) for (const sp of ss.spans ?? []) names.push(sp.name);
      }
      return names;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
