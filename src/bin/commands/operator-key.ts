// `turnstream operator-key new [--out FILE] [--name NAME]` and `turnstream operator-key public [FILE]`.
import { homedir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { generateOperatorKey, loadOperatorKey, OperatorKeyError, writeOperatorKeyFile } from "../../decisions/index.ts";

export const summary = "make an operator signing key (decide needs one; workers trust its public key)";

const usage = `usage: turnstream operator-key new [--out FILE] [--name NAME]
       turnstream operator-key public [FILE]
  new     writes a new Ed25519 private key to FILE (mode 0600; never overwrites; default
          ~/.config/turnstream/operator.key) and prints its public key line
  public  prints the public key line of a private key file (default: TURNSTREAM_OPERATOR_KEY)
  Operators set TURNSTREAM_OPERATOR_KEY=<FILE> for \`turnstream decide\`; add the public key line to the
  workers' TURNSTREAM_OPERATOR_KEYS file (one key per line, an optional name after it).
  --name NAME  a name printed after the key (no spaces), e.g. your login
`;

const NAME = /^[\x21-\x7e]{1,64}$/;

function defaultKeyFile(): string {
  const config = process.env["XDG_CONFIG_HOME"] || join(homedir(), ".config");
  return join(config, "turnstream", "operator.key");
}

function newKey(out: string, name: string | undefined): number {
  const key = generateOperatorKey();
  writeOperatorKeyFile(out, key.privateKeyPem);
  process.stdout.write(`${key.publicKey}${name !== undefined ? ` ${name}` : ""}\n`);
  process.stderr.write(
    `wrote ${out} (key ${key.keyId}); set TURNSTREAM_OPERATOR_KEY=${out} for decide, and add the line above to the workers' TURNSTREAM_OPERATOR_KEYS\n`,
  );
  return 0;
}

function publicKey(file: string | undefined): number {
  const path = file ?? process.env["TURNSTREAM_OPERATOR_KEY"];
  if (path === undefined || path === "") {
    process.stderr.write(
      `turnstream operator-key public: name the private key file (or set TURNSTREAM_OPERATOR_KEY)\n`,
    );
    return 2;
  }
  process.stdout.write(`${loadOperatorKey(path).publicKey}\n`);
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { out: { type: "string" }, name: { type: "string" }, help: { type: "boolean", short: "h" } },
    });
  } catch (err) {
    process.stderr.write(`turnstream operator-key: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const [action, file, ...extra] = positionals;
  if (extra.length > 0 || (action === "new" && file !== undefined) || (action !== "new" && action !== "public")) {
    process.stderr.write(usage);
    return 2;
  }
  if (values.name !== undefined && !NAME.test(values.name)) {
    process.stderr.write("turnstream operator-key: --name must be 1-64 printable characters without spaces\n");
    return 2;
  }
  try {
    return action === "new" ? newKey(values.out ?? defaultKeyFile(), values.name) : publicKey(file);
  } catch (err) {
    if (!(err instanceof OperatorKeyError)) throw err;
    process.stderr.write(`turnstream operator-key: ${err.message}\n`);
    return 2;
  }
}
