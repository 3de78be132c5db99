// A turn's cwd must lie under one of the worker's workspace roots (symlinks resolved), or the turn
// fails without retry: a producer must not point a CLI with tool access anywhere on the machine. It
// must also be a directory that exists: a job whose cwd is missing can never run, so it is the
// caller's mistake (usage), not a failure worth retrying. The roots are checked first, so a producer
// cannot learn through the error kind which paths exist outside them.
import { TurnstreamError } from "../kernel/index.ts";
import { realpathSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";

// The native realpath is one system call; the JavaScript one lstats every component of the path.
function real(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return resolve(path);
  }
}

export function underRoots(cwd: string, roots: readonly string[]): boolean {
  const realCwd = real(cwd);
  return roots.some((root) => {
    const rel = relative(real(root), realCwd);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  });
}

export class WorkspaceNotAllowedError extends TurnstreamError {
  readonly kind = "workspace_not_allowed";
  readonly roots: readonly string[];
  constructor(roots: readonly string[]) {
    super(
      `the turn's cwd is outside this worker's workspace roots (${roots.join(", ")}); enqueue it with a cwd under one of them or add its root to TURNSTREAM_WORKSPACE_ROOTS`,
      { code: "workspace_not_allowed" },
    );
    this.roots = roots;
  }
}

export class BadCwdError extends TurnstreamError {
  readonly kind = "bad_cwd";
  readonly cwd: string;
  constructor(cwd: string, problem: string, workerId: string) {
    super(
      `the turn's cwd ${JSON.stringify(cwd)} ${problem} on worker ${workerId}; enqueue it with an existing directory under the worker's workspace roots`,
      { code: "bad_cwd" },
    );
    this.cwd = cwd;
  }
}
