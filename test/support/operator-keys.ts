// The operator of the tests: a key pair made once per test process, the keyring that trusts it (what
// TURNSTREAM_OPERATOR_KEYS gives), another valid key nobody trusts, and the private key as a file
// for commands and consoles that load it (TURNSTREAM_OPERATOR_KEY).
import { join } from "node:path";
import {
  generateOperatorKey,
  operatorKeyFromPem,
  parseOperatorKeys,
  writeOperatorKeyFile,
} from "../../src/decisions/index.ts";

/** The operator of these tests: hubs, workers and consoles set up by the tests trust its key. */
export const OPERATOR = generateOperatorKey();
export const operatorKey = operatorKeyFromPem(OPERATOR.privateKeyPem);
/** Another valid key that no hub here trusts. */
export const stranger = operatorKeyFromPem(generateOperatorKey().privateKeyPem);
/** The keys the tests' hubs, workers and consoles trust (what TURNSTREAM_OPERATOR_KEYS gives an operator). */
export const trustedKeys = parseOperatorKeys([OPERATOR.publicKey]);

/** The operator's private key written to `<dir>/keys/operator.key` (mode 0600, as `operator-key new` writes it). */
export function operatorKeyFile(dir: string): string {
  const file = join(dir, "keys", "operator.key");
  writeOperatorKeyFile(file, OPERATOR.privateKeyPem);
  return file;
}
