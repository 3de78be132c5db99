// The operator's keys as the commands load them: the private key that signs (`decide`, `tenants set`)
// from --key or TURNSTREAM_OPERATOR_KEY, and the fleet's public keys that check signatures, from
// TURNSTREAM_OPERATOR_KEYS when it is set where the command runs.
import {
  loadOperatorKey,
  OperatorKeyError,
  operatorKeyLinesFromEnv,
  parseOperatorKeys,
  type OperatorKey,
  type OperatorKeyring,
} from "../../decisions/index.ts";

/** The operator's key, or undefined after saying on stderr what to set. `signed` names what it signs. */
function operatorKey(command: string, flag: string | undefined, signed: string): OperatorKey | undefined {
  const path = flag ?? process.env["TURNSTREAM_OPERATOR_KEY"];
  if (path === undefined || path === "") {
    process.stderr.write(
      `turnstream ${command}: ${signed} signed with an operator key: set TURNSTREAM_OPERATOR_KEY to your private key file ` +
        "(or pass --key FILE); make one with `turnstream operator-key new` and give its public key to the workers' TURNSTREAM_OPERATOR_KEYS\n",
    );
    return undefined;
  }
  return loadOperatorKey(path);
}

/** TURNSTREAM_OPERATOR_KEYS when set here: the keys the fleet trusts. Throws OperatorKeyError if it does not parse. */
export function trustedKeysFromEnv(env: NodeJS.ProcessEnv = process.env): OperatorKeyring | undefined {
  const lines = operatorKeyLinesFromEnv(env["TURNSTREAM_OPERATOR_KEYS"]);
  return lines === undefined ? undefined : parseOperatorKeys(lines, "TURNSTREAM_OPERATOR_KEYS");
}

/** The operator's key and the fleet's trusted keys, or undefined after saying on stderr what is wrong. */
export function signingKeys(
  command: string,
  keyFlag: string | undefined,
  signed: string,
): { key: OperatorKey; trusted: OperatorKeyring | undefined } | undefined {
  try {
    const key = operatorKey(command, keyFlag, signed);
    const trusted = trustedKeysFromEnv();
    return key === undefined ? undefined : { key, trusted };
  } catch (err) {
    if (!(err instanceof OperatorKeyError)) throw err;
    process.stderr.write(`turnstream ${command}: ${err.message}\n`);
    return undefined;
  }
}
