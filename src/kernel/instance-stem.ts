// The stem of a process's default instance id: its role and the host it runs on.
import { hostname } from "node:os";

/** `<role>-<host>`, the host name made safe for a folder name or a label value (at most 60 characters of it). */
export function instanceStem(role: string): string {
  return `${role}-${hostname()
    .replace(/[^A-Za-z0-9._-]/g, "-")
    .slice(0, 60)}`;
}
