// The checks on a job's options that need the worker's own settings, so the producer cannot make
// them: paths a job names (skills, addDirs, settingsFile) must lie under the worker's workspace roots,
// as its cwd must, or a job could hand the CLI any file on the machine; and a settings file, which can
// add hooks that run commands, is honoured only on workers that trust job workspaces. A skill folder is
// copied (links followed) or linked for the CLI, so a link inside it must not lead out of the roots
// either: it would put a worker file (a key, a credential) where the model reads the skill.
import { lstatSync, readdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import type { TurnJob } from "../queue/index.ts";
import { jobLimitsRefusal } from "./limits.ts";
import type { WorkerSettings } from "./options.ts";
import { underRoots } from "./workspace.ts";

export interface OptionsRefusal {
  name: string;
  message: string;
}

/** Each path the job names with the option field it came from. */
function namedPaths(options: TurnJob["options"]): Array<{ field: string; path: string }> {
  const skills = (options.skills ?? []).map((s, i) => ({ field: `options.skills.${i}.path`, path: s.path }));
  const addDirs = (options.addDirs ?? []).map((path, i) => ({ field: `options.addDirs.${i}`, path }));
  const settings =
    options.settingsFile === undefined ? [] : [{ field: "options.settingsFile", path: options.settingsFile }];
  return [...skills, ...addDirs, ...settings];
}

/** Most entries of a skill folder looked at; a bigger folder is refused rather than walked. */
const MAX_SKILL_ENTRIES = 2000;

/** Where a link leads (itself when it dangles: nothing to read there). */
function realTarget(link: string): string {
  try {
    return realpathSync(link);
  } catch {
    return link;
  }
}

/** The first entry under `dir` whose real path lies outside the roots ("too many" past the cap). */
function entryOutside(dir: string, roots: readonly string[]): string | undefined {
  const pending = [dir];
  let seen = 0;
  while (pending.length > 0) {
    const current = pending.pop()!;
    let names: string[];
    try {
      names = lstatSync(current).isDirectory() ? readdirSync(current) : [];
    } catch {
      continue;
    }
    for (const name of names) {
      if (++seen > MAX_SKILL_ENTRIES) return `${dir} (more than ${MAX_SKILL_ENTRIES} entries)`;
      const path = join(current, name);
      if (!underRoots(path, roots)) return path;
      if (lstatSync(path).isDirectory()) pending.push(path);
      else if (lstatSync(path).isSymbolicLink()) pending.push(realTarget(path));
    }
  }
  return undefined;
}

/** A skill whose folder holds a link out of the roots, with the offending entry. */
function skillLeavingRoots(options: TurnJob["options"], roots: readonly string[]): OptionsRefusal | undefined {
  for (const [index, skill] of (options.skills ?? []).entries()) {
    const entry = entryOutside(skill.path, roots);
    if (entry === undefined) continue;
    return {
      name: "PathNotAllowed",
      message: `options.skills.${index}.path: ${entry} in the skill leads outside this worker's workspace roots; a skill may not hold links out of them`,
    };
  }
  return undefined;
}

/** Why this worker will not run the job's options, or undefined when it will. */
export function jobOptionsRefusal(
  job: TurnJob,
  settings: Pick<WorkerSettings, "workspaceRoots" | "workspaceTrust" | "limits">,
): OptionsRefusal | undefined {
  const limits = jobLimitsRefusal(job.options, settings.limits);
  if (limits !== undefined) return limits;
  if (job.options.settingsFile !== undefined && settings.workspaceTrust !== "job") {
    return {
      name: "SettingsFileRefused",
      message:
        "options.settingsFile: the turn brings a settings file, which can add hooks that run commands, and this worker does not trust job workspaces; set TURNSTREAM_WORKSPACE_TRUST=job on the worker, or drop settingsFile",
    };
  }
  const outside = namedPaths(job.options).find((p) => !underRoots(p.path, settings.workspaceRoots));
  if (outside === undefined) return skillLeavingRoots(job.options, settings.workspaceRoots);
  return {
    name: "PathNotAllowed",
    message: `${outside.field}: ${outside.path} is outside this worker's workspace roots (${settings.workspaceRoots.join(", ")}); a turn's paths must lie under one of them, links resolved`,
  };
}
