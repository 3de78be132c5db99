// PreToolUse hook forwarder: stdin (the CLI's hook input) → POST to the worker's decision hub →
// stdout `hookSpecificOutput.permissionDecision`. Runs on every risky tool call, so it is plain JS
// with built-ins only (no TypeScript stripping, no dependencies). Every failure prints deny and exits 0.
// argv[2]: a 0600 JSON file {url, token, timeoutMs}; the token is never in argv or the environment.
import { readFileSync } from "node:fs";
import { connect } from "node:net";

const MAX_REPLY = 64 * 1024;
let done = false;

function finish(decision, reason) {
  if (done) return;
  done = true;
  const out = JSON.stringify({
    hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: decision, permissionDecisionReason: reason },
  });
  process.stdout.write(out + "\n", () => process.exit(0));
}

const deny = (why) => finish("deny", `turnstream supervised mode: denied because ${why}`);

process.on("uncaughtException", () => deny("the permission forwarder failed"));
process.on("unhandledRejection", () => deny("the permission forwarder failed"));

let run;
try {
  run = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8"));
  if (typeof run.url !== "string" || typeof run.token !== "string" || !(run.timeoutMs > 0))
    throw new Error("bad run file");
} catch {
  deny("the supervised run's settings could not be read");
}

if (!done) {
  // Shorter than the CLI's hook timeout: a hook the CLI has to cancel is not a clear deny.
  setTimeout(() => deny("no decision arrived in time"), run.timeoutMs);
  const chunks = [];
  process.stdin.on("data", (c) => chunks.push(c));
  process.stdin.on("error", () => deny("the hook input could not be read"));
  process.stdin.on("end", () => post(Buffer.concat(chunks)));
}

// Raw HTTP/1.0 over node:net: importing node:http costs far more start-up than node:net, on every
// tool call. HTTP/1.0 makes the server close the connection and never send a chunked body.
function post(body) {
  if (done) return;
  const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  let url;
  try {
    url = new URL(run.url);
    if (url.protocol !== "http:") throw new Error("not http");
  } catch {
    return deny("the decision hub address is invalid");
  }
  const head =
    `POST /v1/hook HTTP/1.0\r\nHost: ${url.host}\r\nAuthorization: Bearer ${run.token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nX-Turnstream-Nonce: ${nonce}\r\n\r\n`;
  const sock = connect({ host: url.hostname, port: Number(url.port || 80) });
  const parts = [];
  let size = 0;
  // No half-close: node's HTTP server drops a connection whose client ended before the reply.
  sock.on("connect", () => sock.write(Buffer.concat([Buffer.from(head), body])));
  sock.on("data", (chunk) => {
    size += chunk.length;
    if (size > MAX_REPLY) {
      sock.destroy();
      return deny("the decision hub's reply was too large");
    }
    parts.push(chunk);
  });
  sock.on("error", () =>
    deny(size === 0 ? "the decision hub could not be reached" : "the decision hub's reply broke off"),
  );
  sock.on("end", () => answer(Buffer.concat(parts).toString("utf8"), nonce));
}

function answer(text, nonce) {
  const split = text.indexOf("\r\n\r\n");
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  if (split < 0 || status === null) return deny("the decision hub's reply was not HTTP");
  const code = Number(status[1]);
  if (code < 200 || code > 299) return deny(`the decision hub answered HTTP ${code}`);
  const bodyText = text.slice(split + 4);
  const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, split));
  if (length !== null && Buffer.byteLength(bodyText) !== Number(length[1]))
    return deny("the decision hub's reply broke off");
  let reply;
  try {
    reply = JSON.parse(bodyText);
  } catch {
    return deny("the decision hub's reply was not JSON");
  }
  if (reply === null || typeof reply !== "object" || reply.nonce !== nonce || typeof reply.reason !== "string") {
    return deny("the decision hub's reply was malformed");
  }
  if (reply.decision === "allow") return finish("allow", reply.reason);
  if (reply.decision === "deny") return finish("deny", reply.reason);
  // No operator answered in time: the CLI ends its run and the turn parks until one does.
  if (reply.decision === "defer") return finish("defer", reply.reason);
  return deny("the decision hub's reply had no decision");
}
