// `turnstream sweep`: removes the per-run config homes (each holding a credential copy) that dead runs
// left, for one instance or for every instance no live worker holds. Needs no Redis: it reads only
// the instance root. Workers do the same for their own instance when they start and every few minutes.
import { readdirSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { defaultInstanceRoot, instanceHolder, sweepConfigHomes, type SweepResult } from "../../cli/index.ts";
import { ConfigHomeOptionsSchema } from "../../cli/options.ts";
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

function lines(r: SweepResult, names: readonly string[]): HomeLine[] {
  return names.map((home) => ({ home, reason: r.reasons[home] ?? "" }));
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
  const r = sweepConfigHomes({ instanceId: instance, instanceRoot: root, dryRun });
  return {
    ...base,
    removed: lines(r, r.removed),
    kept: lines(r, [...r.live, ...r.young]),
    failed: lines(r, r.failed),
    trash: r.trash,
    staleLocks: r.staleLocks,
  };
}

function printText(reports: readonly InstanceReport[], root: string, dryRun: boolean): void {
  const out: string[] = [];
  if (reports.length === 0) out.push(`no instances under ${root}`);
  const verb = dryRun ? "would remove" : "removed";
  for (const r of reports) {
    if (r.skipped !== undefined) {
      out.push(`${r.instance}: skipped, ${r.skipped}`);
      continue;
    }
    const extra =
      r.trash + r.staleLocks > 0
        ? `, and ${r.trash} ended run(s) awaiting deletion, ${r.staleLocks} stale lock(s)`
        : "";
    out.push(
      `${r.instance}: ${verb} ${r.removed.length} home(s), kept ${r.kept.length}${r.failed.length > 0 ? `, failed ${r.failed.length}` : ""}${extra}`,
    );
    for (const h of r.removed) out.push(`  ${verb} ${h.home}: ${h.reason}`);
    for (const h of r.kept) out.push(`  kept ${h.home}: ${h.reason}`);
    for (const h of r.failed) out.push(`  failed ${h.home}: ${h.reason}`);
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
  const v = parsed.values;
  const all = v.all === true;
  const dryRun = v["dry-run"] === true;
  if (all && v.instance !== undefined) return usageError("--instance and --all exclude each other");
  const instance = all ? undefined : (v.instance ?? (process.env["TURNSTREAM_INSTANCE_ID"] || undefined));
  if (!all && instance === undefined)
    return usageError("name an instance (--instance ID or TURNSTREAM_INSTANCE_ID) or pass --all");
  if (instance !== undefined && !ConfigHomeOptionsSchema.shape.instanceId.safeParse(instance).success)
    return usageError(`${JSON.stringify(instance)} is not an instance id`);
  const root = v["instance-root"] ?? (process.env["TURNSTREAM_INSTANCE_ROOT"] || defaultInstanceRoot());
  if (!isAbsolute(root)) return usageError("--instance-root must be an absolute directory");
  const ids = instance !== undefined ? [instance] : instancesUnder(root);
  const reports = ids.map((id) => sweepInstance(root, id, all, dryRun));
  if (v.json === true) process.stdout.write(JSON.stringify({ instanceRoot: root, dryRun, instances: reports }) + "\n");
  else printText(reports, root, dryRun);
  return EXIT.finished;
}
