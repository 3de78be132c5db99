// Every file the runner writes or removes in a workspace goes through here. A workspace is attacker
// input: a `.skills` folder, a journal or a CLAUDE.md shipped as a symbolic link would otherwise make
// the worker write, truncate or delete a file outside it. So each path is relative to the workspace's
// root, every component below the root is lstat'ed and must be a real folder (never a link), and the
// last one is opened with O_NOFOLLOW (created with O_EXCL where it must be new) and O_NONBLOCK (a FIFO
// planted in its place fails instead of hanging the worker), then checked to be a regular file.
//
// The runner writes before the CLI starts and restores after its process tree is gone, so nothing in
// the turn races these checks; a process outside the turn that can write the workspace is out of scope.
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
  type Stats,
} from "node:fs";
import { isAbsolute, join, normalize, sep } from "node:path";
import { ClaudeCodeCliError } from "./errors.ts";

/** Why a workspace path was refused. */
export type WorkspacePathProblem =
  | "link"
  | "not a folder"
  | "not a regular file"
  | "exists"
  | "outside"
  | "inside its source"
  | "too many entries"
  | "too large";

/** Most entries one copy into the workspace makes (a link loop in a source would never end). */
const MAX_COPY_ENTRIES = 10_000;
/** Largest file one copy into the workspace takes. */
const MAX_COPY_FILE_BYTES = 64 * 1024 * 1024;

/** A workspace write or removal refused because of what lies at `path`. */
export class WorkspacePathError extends ClaudeCodeCliError {
  readonly path: string;
  readonly problem: WorkspacePathProblem;

  constructor(path: string, problem: WorkspacePathProblem) {
    const message = `refusing to write in the workspace: ${path} ${describe(problem)}`;
    super(message, { kind: "bad_options", retryable: false });
    this.path = path;
    this.problem = problem;
  }
}

function describe(problem: WorkspacePathProblem): string {
  switch (problem) {
    case "link":
      return (
        "is a symbolic link (a workspace file the runner writes may not be one, nor lie under one); " +
        "replace it with a regular file or folder"
      );
    case "not a folder":
      return "is not a folder; remove it or rename it";
    case "not a regular file":
      return "is not a regular file (a FIFO, device or socket); remove it";
    case "exists":
      return "already exists; remove it";
    case "outside":
      return "is not a plain relative path inside the workspace";
    case "inside its source":
      return "lies inside the folder it would be copied from; name a skill folder that does not hold the workspace";
    case "too large":
      return `is larger than ${MAX_COPY_FILE_BYTES} bytes; keep big files out of a skill folder`;
    case "too many entries":
      return (
        `would be copied from a link loop or hold more than ${MAX_COPY_ENTRIES} entries; ` +
        "name a smaller folder without loops"
      );
  }
}

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, O_NONBLOCK } = constants;

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * Up to `max` bytes of `path` when it is a regular file (links followed: callers check where it
 * lies), and whether there was more; undefined for anything else. Opened with O_NONBLOCK, so a FIFO
 * planted in a workspace cannot block the worker.
 */
export function readRegularFile(path: string, max: number): { bytes: Buffer; cut: boolean } | undefined {
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return undefined;
    const buf = Buffer.alloc(Math.min(st.size, max));
    const bytesRead = readSync(fd, buf, 0, buf.length, 0);
    return { bytes: buf.subarray(0, bytesRead), cut: st.size > max };
  } finally {
    closeSync(fd);
  }
}

/** A source file's bytes for a copy: a regular file (never a FIFO or device) of bounded size. */
function sourceFile(path: string): Buffer {
  const read = readRegularFile(path, MAX_COPY_FILE_BYTES);
  if (read === undefined) throw new WorkspacePathError(path, "not a regular file");
  if (read.cut) throw new WorkspacePathError(path, "too large");
  return read.bytes;
}

/** The workspace's files, addressed relative to its root; nothing here follows a link. */
export class WorkspaceFiles {
  /** The workspace's real path, resolved once: the caller chose it, links above it are theirs. */
  readonly root: string;

  constructor(cwd: string) {
    if (!isAbsolute(cwd)) throw new WorkspacePathError(cwd, "outside");
    this.root = realpathSync(cwd);
  }

  /** The absolute path of `rel`, which must be a plain relative path (no `..`, not absolute). */
  path(rel: string): string {
    const clean = normalize(rel);
    if (rel === "" || isAbsolute(rel) || clean === ".." || clean.startsWith(`..${sep}`) || clean === ".") {
      throw new WorkspacePathError(join(this.root, rel), "outside");
    }
    return join(this.root, clean);
  }

  /** What lies at `rel` (lstat, links not followed), after checking every folder above it. */
  stat(rel: string): Stats | undefined {
    this.#checkParents(rel);
    return lstatOrUndefined(this.path(rel));
  }

  /** Each folder between the root and `rel` that exists must be a real folder. */
  #checkParents(rel: string): void {
    const parts = normalize(rel)
      .split(sep)
      .filter((p) => p !== "");
    let current = this.root;
    for (const part of parts.slice(0, -1)) {
      current = join(current, part);
      const st = lstatOrUndefined(current);
      if (st === undefined) return;
      if (st.isSymbolicLink()) throw new WorkspacePathError(current, "link");
      if (!st.isDirectory()) throw new WorkspacePathError(current, "not a folder");
    }
  }

  /** Makes `rel` and its missing parents, each a real folder; an existing link anywhere is refused. */
  mkdir(rel: string): void {
    this.path(rel);
    let current = this.root;
    for (const part of normalize(rel)
      .split(sep)
      .filter((p) => p !== "")) {
      current = join(current, part);
      let st = lstatOrUndefined(current);
      if (st === undefined) {
        try {
          mkdirSync(current, { mode: 0o755 });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        }
        st = lstatSync(current);
      }
      if (st.isSymbolicLink()) throw new WorkspacePathError(current, "link");
      if (!st.isDirectory()) throw new WorkspacePathError(current, "not a folder");
    }
  }

  /** Opens `rel` without following a link and checks it is a regular file. */
  #open(rel: string, flags: number): number {
    this.#checkParents(rel);
    const path = this.path(rel);
    let fd: number;
    try {
      fd = openSync(path, flags | O_NOFOLLOW | O_NONBLOCK, 0o644);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ELOOP") throw new WorkspacePathError(path, "link");
      if (code === "EEXIST") throw new WorkspacePathError(path, lstatSync(path).isSymbolicLink() ? "link" : "exists");
      if (code === "ENXIO" || code === "EISDIR") throw new WorkspacePathError(path, "not a regular file");
      throw err;
    }
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw new WorkspacePathError(path, "not a regular file");
    }
    return fd;
  }

  #writeAll(fd: number, data: Uint8Array): void {
    try {
      let done = 0;
      while (done < data.length) done += writeSync(fd, data, done);
    } finally {
      closeSync(fd);
    }
  }

  /** Writes `rel` (replacing a regular file's bytes; `exclusive`: it must not exist yet). */
  write(rel: string, data: string | Uint8Array, options: { exclusive?: boolean } = {}): void {
    const flags = O_WRONLY | O_CREAT | (options.exclusive === true ? O_EXCL : O_TRUNC);
    this.#writeAll(this.#open(rel, flags), typeof data === "string" ? Buffer.from(data) : data);
  }

  /** Appends to `rel`, creating it when missing. */
  append(rel: string, data: string): void {
    this.#writeAll(this.#open(rel, O_WRONLY | O_CREAT | O_APPEND), Buffer.from(data));
  }

  /** The bytes of the regular file `rel`, or undefined when there is none (a link is refused). */
  read(rel: string): Buffer | undefined {
    if (this.stat(rel) === undefined) return undefined;
    const fd = this.#open(rel, O_RDONLY);
    try {
      const size = fstatSync(fd).size;
      const buf = Buffer.alloc(size);
      let done = 0;
      while (done < size) {
        const bytesRead = readSync(fd, buf, done, size - done, done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return buf.subarray(0, done);
    } finally {
      closeSync(fd);
    }
  }

  /** Removes `rel` (a folder with its contents). A link there is removed itself, never followed. */
  remove(rel: string): void {
    this.#checkParents(rel);
    rmSync(this.path(rel), { recursive: true, force: true });
  }

  /** Renames `from` to `to`, both inside the workspace with no link above them. */
  rename(from: string, to: string): void {
    this.#checkParents(from);
    this.#checkParents(to);
    renameSync(this.path(from), this.path(to));
  }

  /** The names of real sub-folders of the folder `rel` (links are not folders here). */
  folders(rel: string): string[] {
    const st = this.stat(rel);
    if (st === undefined) return [];
    if (st.isSymbolicLink()) throw new WorkspacePathError(this.path(rel), "link");
    return readdirSync(this.path(rel), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
  }

  /**
   * Copies the folder `source` (outside the workspace's target; its links were checked by whoever chose
   * it, and are followed) to the new folder `rel`, every file created with O_EXCL. A source holding
   * its own target, or more than MAX_COPY_ENTRIES entries (a link loop), is refused.
   */
  copyIn(source: string, rel: string): void {
    const target = this.path(rel);
    const from = realpathSync(source);
    const holdsTarget = target === from || target.startsWith(`${from}${sep}`);
    if (holdsTarget) throw new WorkspacePathError(target, "inside its source");
    this.#copy(from, rel, { left: MAX_COPY_ENTRIES }, [from]);
  }

  /** Copies the file `source` to the new file `rel`. */
  copyFileIn(source: string, rel: string): void {
    this.write(rel, sourceFile(source), { exclusive: true });
  }

  /** `above`: the real source folders this one lies in, so a link back up is caught as a loop. */
  #copy(source: string, rel: string, budget: { left: number }, above: readonly string[]): void {
    this.mkdir(rel);
    for (const name of readdirSync(source)) {
      if (--budget.left < 0) throw new WorkspacePathError(this.path(rel), "too many entries");
      const from = join(source, name);
      const to = join(rel, name);
      if (!statSync(from).isDirectory()) {
        this.write(to, sourceFile(from), { exclusive: true });
        continue;
      }
      const real = realpathSync(from);
      if (above.includes(real)) throw new WorkspacePathError(this.path(to), "too many entries");
      this.#copy(real, to, budget, [...above, real]);
    }
  }
}
