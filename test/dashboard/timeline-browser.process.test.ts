import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { createHarness, type TestHarness } from "../../src/testing/index.js";
import { HAS_CHROMIUM, launchChromium } from "./chromium.js";

/**
 * The job view's timeline in a real browser (system Chromium through playwright-core): the spans
 * the harness recorded for a streaming job, drawn as bars on one time axis. Every wait is on a
 * DOM condition.
 */
const WAIT_MS = 30_000;
/** `RUNLET_SCREENSHOTS=1` also saves the picture docs/observability.md shows. */
const SCREENSHOTS = process.env["RUNLET_SCREENSHOTS"] === "1";
const DOCS = fileURLToPath(new URL("../../docs/", import.meta.url));

/** What the test reads of an element (the project's TypeScript has no DOM types). */
interface Bar {
  readonly dataset: Record<string, string | undefined>;
  getBoundingClientRect(): { left: number; width: number };
}

const streamer = defineHandler({
  input: z.object({ words: z.array(z.string()) }),
  async *handler({ input }) {
    for (const word of input.words) yield word;
  },
});

describe.skipIf(!HAS_CHROMIUM)("the job timeline in Chromium", { timeout: 90_000 }, () => {
  let h: TestHarness;
  let browser: Awaited<ReturnType<typeof launchChromium>>;

  beforeAll(async () => {
    h = await createHarness({ endpoints: [{ id: "stream", handler: streamer }], dashboard: true });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.[Symbol.asyncDispose]();
    await h?.close();
  });

  it("draws queue, setup, take, handler, stream and result on one axis, in order, with their lengths", async () => {
    const page = await browser.newPage();
    await page.goto(`${h.harness.dashboardUrl}#token=${encodeURIComponent(h.apiKey)}`);
    await page.locator("#conn", { hasText: /^live$/ }).waitFor({ timeout: WAIT_MS });
    await page.selectOption("#run-endpoint", "stream");
    await page.fill("#request", JSON.stringify({ input: { words: ["a", "b", "c"] } }));
    await page.click("#run-submit");
    await page.locator("#job-status", { hasText: /^COMPLETED$/ }).waitFor({ timeout: WAIT_MS });
    await page.locator('#job-timeline [data-span="result"]').waitFor({ timeout: WAIT_MS });
    const id = (await page.textContent("#job-id"))!;
    const expected = h.harness.timeline(id);

    const rows = page.locator("#job-timeline .tl-row");
    const names = await rows.evaluateAll((els) => els.map((e) => (e as unknown as Bar).dataset["span"]));
    expect(names).toEqual(expected.map((s) => s.name));
    expect(names).toEqual(expect.arrayContaining(["queue", "take", "handler", "stream", "result"]));
    // Each bar is where its span is: offsets from the first span, lengths, and the axis's order.
    const bars = await page.locator("#job-timeline .tl-bar").evaluateAll((els) =>
      els.map((e) => ({
        start: Number((e as unknown as Bar).dataset["start"]),
        ms: Number((e as unknown as Bar).dataset["ms"]),
        left: (e as unknown as Bar).getBoundingClientRect().left,
        width: (e as unknown as Bar).getBoundingClientRect().width,
      })),
    );
    const t0 = Math.min(...expected.map((s) => s.start));
    expect(bars.map((b) => b.start)).toEqual(expected.map((s) => s.start - t0));
    expect(bars.map((b) => b.ms)).toEqual(expected.map((s) => (s.end ?? s.start) - s.start));
    const at = (name: string) => bars[names.indexOf(name)]!;
    // Drawn left to right as they happened: the queue before the take, the result last.
    expect(at("queue").left).toBeLessThanOrEqual(at("take").left);
    expect(at("take").left).toBeLessThanOrEqual(at("result").left);
    for (const b of bars) expect(b.width).toBeGreaterThanOrEqual(1);
    expect(await page.getAttribute('#job-timeline [data-span="stream"] .tl-bar', "title")).toMatch(
      /chunks=3 bytes=\d+/,
    );
    if (SCREENSHOTS)
      await page.locator("#job-timeline-box").screenshot({ path: `${DOCS}dashboard-timeline.png` });
    await page.close();
  });
});
