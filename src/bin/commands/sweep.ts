// `turnstream sweep`: removes the per-run config homes (each holding a credential copy) that dead runs
// left, for one instance or for every instance no live worker holds. Needs no Redis: it reads only
// the instance root. Workers do the same for their own instance when they start and every few minutes.
import { readdirSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import {
  ConfigHomeOptionsSchema,
  defaultInstanceRoot,
  instanceHolder,
  sweepConfigHomes,
  type SweepResult,
} from "../../runner/index.ts";
import { EXIT } from "../exit-codes.ts";
import { parseCommandArgs } from "./_args.ts";

export const summary = "remove the config homes dead runs left in an instance root (no Redis needed)";

const usage = `usage: turnstream sweep [--instance ID | --all] [--instance-root DIR] [--dry-run] [--json]
Removes per-run config homes no live process owns: a home whose run's process has ended at once, a
home with no lock once unchanged for an hour (it may be one being made). A live run's home is kept.
  --instance ID        the instance to sweep (default TURNSTREAM_INSTANCE_ID)
  --all                every instance under the root whose id no running worker holds
  --instance-root DIR  default TURNSTREAM_INSTANCE_ROOT, else $XDG_DATA_HOME/turnstream
  --dry-run            say what would be removed; remove nothing
  --json               one JSON object
Exit 0, or 2 on bad arguments.
`;

interface HomeLine {
  home: string;
  reason: string;
}

interface InstanceReport {
  instance: string;
  /** Set when the instance was left alone: a running worker holds it. */
  skipped?: string;
  heldBy?: number;
  removed: HomeLine[];
  kept: HomeLine[];
  failed: HomeLine[];
  trash: number;
  staleLocks: number;
}

function usageError(message: string): number {
  process.stderr.write(`turnstream sweep: ${message}\n${usage}`);
  return EXIT.usage;
}

function instancesUnder(root: string): string[] {
  try {
    return readdirSync(join(root, "instances"))
      .filter((n) => ConfigHomeOptionsSchema.shape.instanceId.safeParse(n).success)
      .sort();
  } catch {
    return [];
  }
}

function lines(swept: SweepResult, names: readonly string[]): HomeLine[] {
  return names.map((home) => ({ home, reason: swept.reasons[home] ?? "" }));
}

function sweepInstance(root: string, instance: string, all: boolean, dryRun: boolean): InstanceReport {
  const holder = instanceHolder(root, instance);
  const base = { instance, ...(holder === undefined ? {} : { heldBy: holder.pid }) };
  if (all && holder !== undefined) {
    return {
      ...base,
      skipped: `held by a running worker (pid ${holder.pid})`,
      removed: [],
      kept: [],
      failed: [],
      trash: 0,
      staleLocks: 0,
    };
  }
  const swept = sweepConfigHomes({ instanceId: instance, instanceRoot: root, dryRun });
  return {
    ...base,
    removed: lines(swept, swept.removed),
    kept: lines(swept, [...swept.live, ...swept.young]),
    failed: lines(swept, swept.failed),
    trash: swept.trash,
    staleLocks: swept.staleLocks,
  };
}

function printText(reports: readonly InstanceReport[], root: string, dryRun: boolean): void {
  const out: string[] = [];
  if (reports.length === 0) out.push(`no instances under ${root}`);
  const verb = dryRun ? "would remove" : "removed";
  for (const report of reports) {
    if (report.skipped !== undefined) {
      out.push(`${report.instance}: skipped, ${report.skipped}`);
      continue;
    }
    const extra =
      report.trash + report.staleLocks > 0
        ? `, and ${report.trash} ended run(s) awaiting deletion, ${report.staleLocks} stale lock(s)`
        : "";
    out.push(
      `${report.instance}: ${verb} ${report.removed.length} home(s), kept ${report.kept.length}${report.failed.length > 0 ? `, failed ${report.failed.length}` : ""}${extra}`,
    );
    for (const home of report.removed) out.push(`  ${verb} ${home.home}: ${home.reason}`);
    for (const home of report.kept) out.push(`  kept ${home.home}: ${home.reason}`);
    for (const home of report.failed) out.push(`  failed ${home.home}: ${home.reason}`);
  }
  process.stdout.write(out.join("\n") + "\n");
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs("sweep", usage, {
    args: argv,
    options: {
      instance: { type: "string" },
      all: { type: "boolean" },
      "instance-root": { type: "string" },
      "dry-run": { type: "boolean" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (typeof parsed === "number") return parsed;
  const values = parsed.values;
  const all = values.all === true;
  const dryRun = values["dry-run"] === true;
  if (all && values.instance !== undefined) return usageError("--instance and --all exclude each other");
  const instance = all ? undefined : (values.instance ?? (process.env["TURNSTREAM_INSTANCE_ID"] || undefined));
  if (!all && instance === undefined)
    return usageError("name an instance (--instance ID or TURNSTREAM_INSTANCE_ID) or pass --all");
  if (instance !== undefined && !ConfigHomeOptionsSchema.shape.instanceId.safeParse(instance).success)
    return usageError(`${JSON.stringify(instance)} is not an instance id`);
  const root = values["instance-root"] ?? (process.env["TURNSTREAM_INSTANCE_ROOT"] || defaultInstanceRoot());
  if (!isAbsolute(root)) return usageError("--instance-root must be an absolute directory");
  const ids = instance !== undefined ? [instance] : instancesUnder(root);
  const reports = ids.map((id) => sweepInstance(root, id, all, dryRun));
  if (values.json === true)
    process.stdout.write(JSON.stringify({ instanceRoot: root, dryRun, instances: reports }) + "\n");
  else printText(reports, root, dryRun);
  return EXIT.finished;
}
