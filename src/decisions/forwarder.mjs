// PreToolUse hook forwarder: stdin (the CLI's hook input) → POST to the worker's decision hub →
// stdout `hookSpecificOutput.permissionDecision`. Runs on every risky tool call, so it is plain JS
// with built-ins only (no TypeScript stripping, no dependencies). Every failure prints deny and exits 0.
// argv[2]: a 0600 JSON file {url, token, timeoutMs}; the token is never in argv or the environment.
import { readFileSync } from "node:fs";
import { request } from "node:http";

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
  if (typeof run.url !== "string" || typeof run.token !== "string" || !(run.timeoutMs > 0)) throw new Error("bad run file");
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

function post(body) {
  if (done) return;
  const nonce = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  let url;
  try {
    url = new URL("/v1/hook", run.url);
  } catch {
    return deny("the decision hub address is invalid");
  }
  const req = request(
    url,
    {
      method: "POST",
      headers: {
        authorization: `Bearer ${run.token}`,
        "content-type": "application/json",
        "content-length": body.length,
        "x-turnstream-nonce": nonce,
      },
    },
    (res) => {
      const parts = [];
      let size = 0;
      res.on("data", (c) => {
        size += c.length;
        if (size > MAX_REPLY) {
          req.destroy();
          return deny("the decision hub's reply was too large");
        }
        parts.push(c);
      });
      res.on("error", () => deny("the decision hub's reply broke off"));
      res.on("end", () => {
        if (res.statusCode === undefined || res.statusCode < 200 || res.statusCode > 299) {
          return deny(`the decision hub answered HTTP ${res.statusCode}`);
        }
        let reply;
        try {
          reply = JSON.parse(Buffer.concat(parts).toString("utf8"));
        } catch {
          return deny("the decision hub's reply was not JSON");
        }
        if (reply === null || typeof reply !== "object" || reply.nonce !== nonce || typeof reply.reason !== "string") {
          return deny("the decision hub's reply was malformed");
        }
        if (reply.decision === "allow") return finish("allow", reply.reason);
        if (reply.decision === "deny") return finish("deny", reply.reason);
        return deny("the decision hub's reply had no decision");
      });
    },
  );
  req.on("error", () => deny("the decision hub could not be reached"));
  req.end(body);
}
