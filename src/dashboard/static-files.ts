// The page's files, shipped beside this module and read once at start: HTML, CSS and browser ES
// modules; no build step, nothing fetched from elsewhere.
import { readdirSync, readFileSync } from "node:fs";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

export interface StaticFile {
  type: string;
  body: string;
}

export function loadStaticFiles(): Map<string, StaticFile> {
  const dir = fileURLToPath(new URL("./static/", import.meta.url));
  const files = new Map<string, StaticFile>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type !== undefined) files.set(name, { type, body: readFileSync(`${dir}${name}`, "utf8") });
  }
  return files;
}

/** Escapes a value for an HTML attribute (the CSRF token is base64url, but say so in code). */
export function attr(value: string): string {
  return value.replace(/[&"<>']/g, (c) => `&#${c.charCodeAt(0)};`);
}
