import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/**
 * The browser tests drive Debian's `chromium` package through playwright-core (whose own browser
 * download cannot run everywhere): the system binary, headless, with a fresh profile per launch.
 */
export const CHROMIUM_PATH = process.env["RUNLET_CHROMIUM"] ?? "/usr/bin/chromium";
export const HAS_CHROMIUM = existsSync(CHROMIUM_PATH);
const MISSING = `no Chromium at ${CHROMIUM_PATH} (install it with: apt-get install chromium)`;

if (!HAS_CHROMIUM) {
  // CI installs Chromium (.ci/run), so a missing one there is a broken set-up, never a skip.
  if (process.env["CI"] === "true") throw new Error(`the dashboard browser tests must run in CI: ${MISSING}`);
  console.warn(`skipping the dashboard browser tests: ${MISSING}`);
}

/** A headless Chromium with a fresh, throw-away user-data-dir; dispose to close it and delete the profile. */
export async function launchChromium(): Promise<BrowserContext & AsyncDisposable> {
  const profile = await mkdtemp(join(tmpdir(), "runlet-chromium-"));
  const args = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    // Chromium refuses to start its sandbox as root (CI containers run as root).
    ...(process.getuid?.() === 0 ? ["--no-sandbox"] : []),
  ];
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args,
      viewport: { width: 1400, height: 900 },
    });
  } catch (err) {
    await rm(profile, { recursive: true, force: true });
    throw err;
  }
  return Object.assign(context, {
    async [Symbol.asyncDispose]() {
      try {
        await context.close();
      } finally {
        await rm(profile, { recursive: true, force: true });
      }
    },
  });
}
