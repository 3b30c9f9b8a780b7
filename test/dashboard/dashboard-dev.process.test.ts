import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, type RunningCli, startCli } from "../support/run-cli.js";
import { freePort } from "../support/sidecar-rig.js";
import { HAS_CHROMIUM, launchChromium } from "./chromium.js";

/**
 * The dashboard of a real `runlet dev` in Chromium: the form starts from the schema its worker
 * process reported, a job's handler metrics come from the worker's log line, and an open tab
 * keeps working across a restart of `dev` (same key, same port). Every wait is on a DOM condition.
 */
const WAIT_MS = 60_000;

const HANDLER = [
  `import { z } from ${JSON.stringify(import.meta.resolve("zod"))};`,
  `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};`,
  "export default defineHandler({",
  "  input: z.object({ prompt: z.string().min(1), steps: z.number().int().default(4) }),",
  "  handler({ input, metrics }) {",
  "    metrics.set('model', 'tiny-v1');",
  "    metrics.increment('steps', input.steps);",
  "    return { drew: input.prompt };",
  "  },",
  "});",
  "",
].join("\n");

describe.skipIf(!HAS_CHROMIUM)("runlet dev's dashboard in Chromium", { timeout: 180_000 }, () => {
  let tmp: string;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let dev: RunningCli | undefined;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), "runlet-dashboard-dev-"));
    await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
    await writeFile(join(tmp, "handler.ts"), HANDLER);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await dev?.stop();
    await browser?.[Symbol.asyncDispose]();
    await rm(tmp, { recursive: true, force: true });
  });

  async function send(page: Page, body: unknown): Promise<void> {
    await page.fill("#request", JSON.stringify(body));
    const before = (await page.textContent("#job-id")) ?? "";
    await page.click("#run-submit");
    const other = new RegExp(`^(?!${before.replace(/[^\w-]/g, "\\$&")}$).+$`);
    await page.locator("#job-id", { hasText: other }).waitFor({ timeout: WAIT_MS });
    await page.locator("#job-status", { hasText: /^COMPLETED$/ }).waitFor({ timeout: WAIT_MS });
  }

  it("starts the form from the worker's schema, shows a job's metrics, and keeps the tab working across a restart", async () => {
    const args = ["dev", "handler.ts", "--port", "0", "--dashboard-port", String(await freePort())];
    dev = startCli(args, { cwd: tmp });
    const [, link] = await dev.waitFor(/dashboard (http:\/\/\S+)\n/, WAIT_MS);
    const page = await browser.newPage();
    await page.goto(link!);
    await page.locator("#conn", { hasText: /^live$/ }).waitFor({ timeout: WAIT_MS });
    // The worker process described its handler: the form holds a valid example of its input.
    await page.locator('#schema-fields [data-field="prompt"]').waitFor({ timeout: WAIT_MS });
    expect(JSON.parse(await page.inputValue("#request"))).toEqual({ input: { prompt: "x", steps: 4 } });

    await send(page, { input: { prompt: "a fox", steps: 3 } });
    // ctx.metrics reach runlet only in the worker's Finished. line; dev hands them to the page.
    await page
      .locator('#job-metrics [data-metric="steps"]', { hasText: /^3$/ })
      .waitFor({ timeout: WAIT_MS });
    expect(await page.textContent('#job-metrics [data-metric="model"]')).toBe("tiny-v1");

    // dev stops: the tab says it is reconnecting; dev comes back with the same key and port.
    expect(await dev.stop()).toBe(0);
    await page.locator("#conn", { hasText: /^reconnecting/ }).waitFor({ timeout: WAIT_MS });
    dev = startCli(args, { cwd: tmp });
    await dev.waitFor(/dashboard http/, WAIT_MS);
    await page.locator("#conn", { hasText: /^live$/ }).waitFor({ timeout: WAIT_MS });
    expect(await page.isHidden("#locked")).toBe(true);
    await send(page, { input: { prompt: "a hen" } });
    // The status can show COMPLETED a moment before the output is drawn: wait for the output itself.
    await page.locator("#job-output", { hasText: '"drew": "a hen"' }).waitFor({ timeout: WAIT_MS });
  });
});
