// The checks on a job's options that need the worker's own settings, so the producer cannot make
// them: paths a job names (skills, addDirs, settingsFile) must lie under the worker's workspace roots,
// as its cwd must, or a job could hand the CLI any file on the machine; and a settings file, which can
// add hooks that run commands, is honoured only on workers that trust job workspaces.
import type { TurnJob } from "../queue/index.ts";
import type { WorkerSettings } from "./options.ts";
import { underRoots } from "./workspace.ts";

export interface OptionsRefusal {
  name: string;
  message: string;
}

/** Each path the job names with the option field it came from. */
function namedPaths(o: TurnJob["options"]): Array<{ field: string; path: string }> {
  const skills = (o.skills ?? []).map((s, i) => ({ field: `options.skills.${i}.path`, path: s.path }));
  const addDirs = (o.addDirs ?? []).map((path, i) => ({ field: `options.addDirs.${i}`, path }));
  const settings = o.settingsFile === undefined ? [] : [{ field: "options.settingsFile", path: o.settingsFile }];
  return [...skills, ...addDirs, ...settings];
}

/** Why this worker will not run the job's options, or undefined when it will. */
export function jobOptionsRefusal(job: TurnJob, settings: Pick<WorkerSettings, "workspaceRoots" | "workspaceTrust">): OptionsRefusal | undefined {
  if (job.options.settingsFile !== undefined && settings.workspaceTrust !== "job") {
    return {
      name: "SettingsFileRefused",
      message:
        "options.settingsFile: the turn brings a settings file, which can add hooks that run commands, and this worker does not trust job workspaces; set TURNSTREAM_WORKSPACE_TRUST=job on the worker, or drop settingsFile",
    };
  }
  const outside = namedPaths(job.options).find((p) => !underRoots(p.path, settings.workspaceRoots));
  if (outside === undefined) return undefined;
  return {
    name: "PathNotAllowed",
    message: `${outside.field}: ${outside.path} is outside this worker's workspace roots (${settings.workspaceRoots.join(", ")}); a turn's paths must lie under one of them, links resolved`,
  };
}
