// Operator keys: who may decide. An operator holds an Ed25519 private key (a 0600 PEM file); workers
// hold the operators' public keys. Anyone who can write to Redis can append a `decision.made` or store
// a rule, so the hub accepts only what one of those keys signed: Redis access alone decides nothing.
//
// Public key text: `ed25519:<base64url of the 32-byte key>` optionally followed by a name, one per line
// in a file (`#` starts a comment). The key id is derived from the key, so it cannot be claimed.
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { OperatorKeyError } from "./errors.ts";

export const PUBLIC_KEY_PREFIX = "ed25519:";
const RAW_KEY = /^[A-Za-z0-9_-]{43}$/;
const NAME = /^[\x21-\x7e]{1,64}$/;

/** A private key that signs decisions and rules. */
export interface OperatorKey {
  readonly keyId: string;
  /** The public key text to give to workers (`ed25519:…`). */
  readonly publicKey: string;
  sign(message: Buffer): string;
}

/** The public keys a hub trusts. */
export interface OperatorKeyring {
  readonly size: number;
  has(keyId: string): boolean;
  /** The name given after the key in its line, if any. */
  nameOf(keyId: string): string | undefined;
  verify(keyId: string, message: Buffer, signature: string): boolean;
}

/** `op-` + the first 16 hex digits of sha256(raw public key). */
export function keyIdOf(rawPublicKey: Buffer): string {
  return `op-${createHash("sha256").update(rawPublicKey).digest("hex").slice(0, 16)}`;
}

function publicKeyText(key: KeyObject): string {
  const publicKeyX = key.export({ format: "jwk" }).x;
  if (typeof publicKeyX !== "string")
    throw new OperatorKeyError("the key is not an Ed25519 key; make one with `turnstream operator-key new`");
  return `${PUBLIC_KEY_PREFIX}${publicKeyX}`;
}

function signerFor(privateKey: KeyObject): OperatorKey {
  if (privateKey.asymmetricKeyType !== "ed25519") {
    throw new OperatorKeyError(
      `the key is ${privateKey.asymmetricKeyType ?? "not asymmetric"}, not Ed25519; make one with \`turnstream operator-key new\``,
    );
  }
  const publicKey = publicKeyText(createPublicKey(privateKey));
  const keyId = keyIdOf(Buffer.from(publicKey.slice(PUBLIC_KEY_PREFIX.length), "base64url"));
  return { keyId, publicKey, sign: (message) => sign(null, message, privateKey).toString("base64url") };
}

export interface GeneratedOperatorKey {
  /** PKCS#8 PEM: the operator's secret, for a 0600 file. */
  privateKeyPem: string;
  publicKey: string;
  keyId: string;
}

/** A new Ed25519 operator key: the private PEM for the operator's 0600 file, and the public key line workers trust. */
export function generateOperatorKey(): GeneratedOperatorKey {
  const { privateKey } = generateKeyPairSync("ed25519");
  const signer = signerFor(privateKey);
  return {
    privateKeyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKey: signer.publicKey,
    keyId: signer.keyId,
  };
}

/** Writes a new private key file with mode 0600 (its folder 0700 when created); never overwrites. */
export function writeOperatorKeyFile(path: string, privateKeyPem: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(path, privateKeyPem, { mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST")
      throw new OperatorKeyError(`${path} already exists; choose another file with --out (a key is never overwritten)`);
    throw err;
  }
  // The umask may have narrowed the mode further, never widened it; make it exact.
  chmodSync(path, 0o600);
}

export function operatorKeyFromPem(pem: string): OperatorKey {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw new OperatorKeyError(
      "the operator key is not a PEM private key; make one with `turnstream operator-key new`",
    );
  }
  return signerFor(key);
}

/** Loads a private key file; refuses one that others can read (like ssh does). */
export function loadOperatorKey(path: string): OperatorKey {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch {
    throw new OperatorKeyError(
      `cannot read the operator key file ${path}; set TURNSTREAM_OPERATOR_KEY to your key file (make one with \`turnstream operator-key new\`)`,
    );
  }
  if ((mode & 0o077) !== 0) {
    throw new OperatorKeyError(
      `the operator key file ${path} can be read by others (mode ${(mode & 0o777).toString(8)}); run chmod 600 ${path}`,
    );
  }
  return operatorKeyFromPem(readFileSync(path, "utf8"));
}

interface TrustedKey {
  key: KeyObject;
  name: string | undefined;
}

function parseKeyLine(line: string, where: string): [string, TrustedKey] {
  const [text, name, ...rest] = line.split(/\s+/);
  const raw = text!.startsWith(PUBLIC_KEY_PREFIX) ? text!.slice(PUBLIC_KEY_PREFIX.length) : "";
  if (!RAW_KEY.test(raw) || rest.length > 0 || (name !== undefined && !NAME.test(name))) {
    throw new OperatorKeyError(
      `${where}: write each operator key as "ed25519:<43 base64url characters> [name]", as \`turnstream operator-key new\` prints it`,
    );
  }
  const bytes = Buffer.from(raw, "base64url");
  const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw }, format: "jwk" });
  return [keyIdOf(bytes), { key, name }];
}

/** Public keys, one per line (or given as separate strings); blank lines and `#` comments are skipped. */
export function parseOperatorKeys(text: string | readonly string[], source = "operator keys"): OperatorKeyring {
  const lines = typeof text === "string" ? text.split(/\r?\n/) : text.flatMap((t) => t.split(/\r?\n/));
  const keys = new Map<string, TrustedKey>();
  lines.forEach((rawLine, index) => {
    const line = rawLine.replace(/#.*$/, "").trim();
    if (line.length === 0) return;
    const [id, trusted] = parseKeyLine(line, `${source} line ${index + 1}`);
    keys.set(id, trusted);
  });
  return keyringOf(keys);
}

function keyringOf(keys: ReadonlyMap<string, TrustedKey>): OperatorKeyring {
  return {
    size: keys.size,
    has: (keyId) => keys.has(keyId),
    nameOf: (keyId) => keys.get(keyId)?.name,
    verify(keyId, message, signature) {
      const trusted = keys.get(keyId);
      if (trusted === undefined || !/^[A-Za-z0-9_-]{86}$/.test(signature)) return false;
      return verify(null, message, trusted.key, Buffer.from(signature, "base64url"));
    },
  };
}

/**
 * TURNSTREAM_OPERATOR_KEYS: an absolute path to a file of public keys, or the keys themselves
 * (comma- or newline-separated). Undefined when the variable is unset or empty.
 */
export function operatorKeyLinesFromEnv(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (trimmed.startsWith("/")) {
    try {
      return readFileSync(trimmed, "utf8").split(/\r?\n/);
    } catch {
      throw new OperatorKeyError(
        `TURNSTREAM_OPERATOR_KEYS names ${trimmed}, which cannot be read; point it at a file with one operator public key per line`,
      );
    }
  }
  return trimmed.split(/[,\n]/);
}
