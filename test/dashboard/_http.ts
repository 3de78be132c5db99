// Plain HTTP against a dashboard, for the tests that play a page (or an attacker) without a browser:
// any request, and a same-origin JSON POST carrying the page's CSRF token, as the page sends it.
import { request } from "node:http";
import type { Dashboard } from "../../src/dashboard/index.ts";

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

/** POSTs JSON to a path of the dashboard as its page does; `csrf` replaces the page's token. */
export type Poster = (path: string, body: unknown, csrf?: string) => Promise<Answer>;

/** A same-origin JSON POST with the page's CSRF token (and `headers`, e.g. a login's cookie). */
export async function poster(dash: Dashboard, headers: Record<string, string> = {}): Promise<Poster> {
  const token = /<meta name="ts-csrf" content="([^"]+)">/.exec((await call(dash.url, { headers })).body)![1]!;
  return (path, body, csrf = token) =>
    call(`${dash.url}${path}`, {
      method: "POST",
      headers: {
        ...headers,
        "Content-Type": "application/json",
        "X-Turnstream-CSRF": csrf,
        Origin: dash.url.slice(0, -1),
      },
      body: JSON.stringify(body),
    });
}
