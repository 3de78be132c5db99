// Headless Chromium (Debian's `chromium`, which .ci/run installs) driven by playwright-core, the
// folder where the dashboard tests leave their screenshots, and a look at what the server streams.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { startDashboard, type Dashboard, type DashboardOptions } from "../../src/dashboard/index.ts";
import type { RedisClient } from "../../src/log/index.ts";
import { repoRoot } from "../support/build.ts";
import { operatorKey, trustedKeys } from "../support/operator-keys.ts";

export const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
export const ARTIFACTS = join(repoRoot, "test-artifacts", "dashboard");

export async function launchBrowser(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  // As root (CI) Chromium runs only without its sandbox; the pages here are our own.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
}

/** A page that fails the test on any script error or CSP violation it reports. */
export async function openPage(browser: Browser, errors: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on("pageerror", (err) => errors.push(`pageerror: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(`console: ${msg.text()}`);
  });
  return page;
}

export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  return path;
}

/** What consoleFor opens: the dashboard, a browser and a page whose errors are collected. */
export interface TestConsole {
  dash: Dashboard;
  browser: Browser;
  page: Page;
  errors: string[];
  /** Closes the browser, then the dashboard. */
  close(): Promise<void>;
}

/** A dashboard over a test stage's prefixes (with any `options` of the test's) and a fresh page on it. */
export async function consoleFor(
  stage: {
    redis: RedisClient;
    space: { logPrefix: string; queuePrefix: string };
  },
  options: Partial<DashboardOptions> = {},
): Promise<TestConsole> {
  const dash = await startDashboard({
    redis: stage.redis,
    prefix: stage.space.logPrefix,
    queuePrefix: stage.space.queuePrefix,
    ...options,
  });
  const browser = await launchBrowser();
  const errors: string[] = [];
  const page = await openPage(browser, errors);
  const close = async (): Promise<void> => {
    await browser.close();
    await dash.close();
  };
  return { dash, browser, page, errors, close };
}

/**
 * A dashboard over a decisions test's keys (test/decisions/_support.ts `setup`) that signs as the test
 * operator and trusts its key, unless `options` say otherwise.
 */
export function signingConsole(
  ctx: { redis: RedisClient; prefix: string },
  options: Partial<DashboardOptions> = {},
): Promise<Dashboard> {
  return startDashboard({
    redis: ctx.redis,
    prefix: ctx.prefix,
    queuePrefix: `{${ctx.prefix}queue}`,
    operatorKey,
    trustedKeys,
    ...options,
  });
}

/** The first `count` events of an SSE answer (the snapshot), then the connection is dropped. */
export async function firstEvents(url: string, count: number): Promise<string> {
  const ac = new AbortController();
  const res = await fetch(url, { signal: ac.signal });
  const reader = res.body!.getReader();
  let text = "";
  while (text.split("\n\n").length <= count) text += new TextDecoder().decode((await reader.read()).value);
  ac.abort();
  return text;
}
