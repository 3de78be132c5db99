// Run tokens: each run gets a random token that the gateway swaps for the worker's credential. A token
// is looked up by its SHA-256 (so the table never holds a presented secret, and the lookup's time does
// not depend on how much of a guess was right), then compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Credential } from "./credential.ts";
import type { ModelCall } from "./calls.ts";

/** What a token stands for: a session's run, and while a turn runs on it, that turn and attempt. */
export interface RunBinding {
  session: string;
  turn?: string | undefined;
  attempt?: number | undefined;
  /** Whose turn it is, when the turn names a tenant: budgets are counted per tenant. */
  tenant?: string | undefined;
}

/** Where a run's model calls go (the attempt's event log); undefined while no turn runs on the token. */
export interface CallSink {
  binding: RunBinding;
  onCall(call: ModelCall): void;
}

/** Where a token's requests go and with what. */
export interface Upstream {
  baseUrl: URL;
  credential: Credential;
}

/** The token's prefix: says what it is when one turns up in a log. */
export const TOKEN_PREFIX = "turnstream-gw-";
const TOKEN_BYTES = 32;

export class RunGrant {
  readonly token: string;
  readonly upstream: Upstream;
  #sink: CallSink | undefined;
  #revoked = false;
  readonly #table: GrantTable;
  readonly #hash: Buffer;

  constructor(table: GrantTable, upstream: Upstream, sink: CallSink | undefined) {
    this.token = TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString("base64url");
    this.#hash = hashOf(this.token);
    this.upstream = upstream;
    this.#sink = sink;
    this.#table = table;
  }

  get hash(): Buffer {
    return this.#hash;
  }

  get revoked(): boolean {
    return this.#revoked;
  }

  /** The turn the token's calls belong to now (undefined: none runs, so its calls are refused). */
  get sink(): CallSink | undefined {
    return this.#sink;
  }

  /** Binds the token to a turn (a warm process's next turn), or to none between turns. */
  attach(sink: CallSink | undefined): void {
    this.#sink = sink;
  }

  /** Ends the token: every later request with it is refused. Idempotent. */
  revoke(): void {
    if (this.#revoked) return;
    this.#revoked = true;
    this.#sink = undefined;
    this.#table.remove(this);
  }
}

const hashOf = (token: string): Buffer => createHash("sha256").update(token).digest();

export class GrantTable {
  readonly #byHash = new Map<string, RunGrant>();

  issue(upstream: Upstream, sink?: CallSink): RunGrant {
    const grant = new RunGrant(this, upstream, sink);
    this.#byHash.set(grant.hash.toString("hex"), grant);
    return grant;
  }

  /** The live grant a presented token names, if any. */
  find(presented: string | undefined): RunGrant | undefined {
    if (presented === undefined || !presented.startsWith(TOKEN_PREFIX)) return undefined;
    const hash = hashOf(presented);
    const grant = this.#byHash.get(hash.toString("hex"));
    if (grant === undefined || grant.revoked || !timingSafeEqual(hash, grant.hash)) return undefined;
    return grant;
  }

  remove(grant: RunGrant): void {
    this.#byHash.delete(grant.hash.toString("hex"));
  }

  get size(): number {
    return this.#byHash.size;
  }

  /** Revokes every token (the gateway closes). */
  revokeAll(): void {
    for (const grant of [...this.#byHash.values()]) grant.revoke();
  }
}
