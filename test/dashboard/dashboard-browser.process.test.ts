import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { defineOpenAIHandler } from "../../src/openai/index.js";
import { createHarness, type TestHarness } from "../../src/testing/index.js";
import { HAS_CHROMIUM, launchChromium } from "./chromium.js";

/**
 * The dashboard in a real browser (system Chromium through playwright-core) against a harness with
 * in-process workers, as `runlet dev` runs them. Every wait is on a DOM condition.
 * `RUNLET_SCREENSHOTS=1` also saves the screenshots docs/ shows.
 */
const SCREENSHOTS = process.env["RUNLET_SCREENSHOTS"] === "1";
const DOCS = fileURLToPath(new URL("../../docs/", import.meta.url));
/** Generous: the machine may be slow, and each wait ends as soon as its condition holds. */
const WAIT_MS = 30_000;

const TRACEBACK =
  "RangeError: the dial only goes to 10\n    at turnDial (src/handler.ts:12:11)\n    at handler (src/handler.ts:20:5)";

const echo = defineHandler({
  input: z.object({
    text: z.string().default(""),
    holdUntilCancelled: z.boolean().default(false),
    fail: z.boolean().default(false),
  }),
  concurrency: 2,
  async handler({ input, signal, progress }) {
    if (input.fail) {
      progress({ step: 1 });
      progress({ step: 2 });
      const err = new RangeError("the dial only goes to 10");
      // A fixed stack: the real one names files of this checkout, and the screenshot of it is committed.
      err.stack = TRACEBACK;
      throw err;
    }
    if (input.holdUntilCancelled) {
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      return { stopped: true };
    }
    return { echo: input.text.toUpperCase() };
  },
});

/** A handler with a required field and a default: the form starts from its schema. It reports metrics. */
const former = defineHandler({
  input: z.object({
    prompt: z.string().min(1).describe("what to draw"),
    steps: z.number().int().min(1).default(4),
    seed: z.number().int().optional(),
  }),
  handler({ input, metrics }) {
    metrics.set("model", "tiny-v1");
    metrics.increment("steps", input.steps);
    return { drew: input.prompt, steps: input.steps };
  },
});

/** An OpenAI handler: chat replies with two words and says how many tokens the prompt took. */
const chatty = defineOpenAIHandler({
  models: ["echo-1"],
  async *chat() {
    yield "Hello";
    yield " there";
    return { finish_reason: "stop", usage: { prompt_tokens: 3 } };
  },
});

/** The streaming handler yields two tokens, then waits for the test to open its gate. */
let openGate: () => void = () => {};
let gate = Promise.resolve();
const streamer = defineHandler({
  input: z.object({ words: z.array(z.string()).min(3) }),
  async *handler({ input, signal, metrics }) {
    const [first, second, ...rest] = input.words;
    // Each chunk carries the job's metrics as they were when it was yielded.
    metrics.increment("words");
    yield first!;
    metrics.increment("words");
    yield ` ${second}`;
    await Promise.race([gate, new Promise((resolve) => signal.addEventListener("abort", resolve))]);
    for (const word of rest) {
      metrics.increment("words");
      yield ` ${word}`;
    }
  },
});

// Each wait may take up to WAIT_MS on a loaded machine; a test has room for a few of them.
describe.skipIf(!HAS_CHROMIUM)("the dashboard in Chromium", { timeout: 90_000 }, () => {
  let h: TestHarness;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;

  beforeAll(async () => {
    h = await createHarness({
      endpoints: [
        { id: "local", handler: echo },
        { id: "stream", handler: streamer },
        { id: "form", handler: former },
        { id: "chat", handler: chatty },
        { id: "parked" },
      ],
      dashboard: true,
    });
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(`${h.harness.dashboardUrl}#token=${encodeURIComponent(h.apiKey)}`);
    await page.locator("#conn", { hasText: /^live$/ }).waitFor({ timeout: WAIT_MS });
  }, 120_000);

  afterAll(async () => {
    await browser?.[Symbol.asyncDispose]();
    await h?.close();
  });

  /** Submits `body` from the form to `endpointId`; resolves with the id of the job the page opened. */
  async function submit(endpointId: string, body: unknown): Promise<string> {
    await page.selectOption("#run-endpoint", endpointId);
    await page.fill("#request", JSON.stringify(body));
    const before = await page.textContent("#job-id");
    await page.click("#run-submit");
    // Any id but the one shown before (the page's CSP forbids the string evaluation waitForFunction would need).
    const other = new RegExp(`^(?!${(before ?? "").replace(/[^\w-]/g, "\\$&")}$).+$`);
    await page.locator("#job-id", { hasText: other }).waitFor({ timeout: WAIT_MS });
    return (await page.textContent("#job-id"))!;
  }

  const statusIs = (status: string) =>
    page.locator("#job-status", { hasText: new RegExp(`^${status}$`) }).waitFor({ timeout: WAIT_MS });

  it("takes the key from the link, drops it from the address, and starts the editor from the handler's schema", async () => {
    expect(page.url()).toBe(h.harness.dashboardUrl);
    expect(JSON.parse(await page.inputValue("#request"))).toEqual({
      input: { text: "", holdUntilCancelled: false, fail: false },
    });
  });

  it("starts the form from a schema's defaults, marks required fields, and shows its errors before sending", async () => {
    await page.selectOption("#run-endpoint", "form");
    // A valid example: the default filled in, the required prompt given a placeholder that passes its check.
    expect(JSON.parse(await page.inputValue("#request"))).toEqual({ input: { prompt: "x", steps: 4 } });
    expect(await page.locator("#schema-fields code").allTextContents()).toEqual([
      "prompt*: string",
      "steps: integer = 4",
      "seed: integer",
    ]);
    expect(await page.getAttribute('#schema-fields [data-field="prompt"]', "class")).toContain(
      "required-field",
    );
    expect(await page.locator("#schema-errors li").count()).toBe(0);
    // Edits are checked as they are typed, before anything is sent.
    await page.fill("#request", JSON.stringify({ input: { prompt: "", steps: 0 } }));
    expect(await page.locator("#schema-errors li").allTextContents()).toEqual([
      "input.prompt must be at least 1 character",
      "input.steps must be at least 1",
    ]);
    await page.fill("#request", JSON.stringify({ input: { steps: 2 } }));
    expect(await page.locator("#schema-errors li").allTextContents()).toEqual(["input.prompt is required"]);
    // Sent anyway, the handler's own check fails it: its three-line message stays on three lines.
    await page.fill("#request", JSON.stringify({ input: { prompt: "" } }));
    const bad = await submit("form", { input: { prompt: "" } });
    await statusIs("FAILED");
    const error = h.harness.job(bad)?.error ?? "";
    expect(error.split("\n")).toHaveLength(3);
    expect(await page.innerText("#job-failure .failure-message")).toBe(error);
    // A good one completes; its handler metrics show in the job view.
    await submit("form", { input: { prompt: "a fox" } });
    await statusIs("COMPLETED");
    await page
      .locator('#job-metrics [data-metric="steps"]', { hasText: /^4$/ })
      .waitFor({ timeout: WAIT_MS });
    expect(await page.textContent('#job-metrics [data-metric="model"]')).toBe("tiny-v1");
    if (SCREENSHOTS) {
      // The form with an edit that breaks the schema, beside the job's metrics.
      await page.fill("#request", JSON.stringify({ input: { prompt: "", steps: 0 } }, null, 2));
      await page.screenshot({ path: `${DOCS}dashboard-form.png`, fullPage: true });
    }
  });

  it("shows an OpenAI job's reply as text, with its finish reason and usage, the raw stream folded beneath", async () => {
    const body = {
      input: {
        openai_route: "/v1/chat/completions",
        openai_input: {
          model: "echo-1",
          messages: [{ role: "user", content: "hi" }],
          stream: true,
          stream_options: { include_usage: true },
        },
      },
    };
    await submit("chat", body);
    await statusIs("COMPLETED");
    await page.locator("#openai-text", { hasText: /^Hello there$/ }).waitFor({ timeout: WAIT_MS });
    expect(await page.textContent("#openai-facts .openai-finish-reason")).toBe("stop");
    expect(await page.textContent("#openai-facts .openai-usage")).toBe("3 prompt + 2 completion = 5 tokens");
    if (SCREENSHOTS) await page.screenshot({ path: `${DOCS}dashboard-openai.png`, fullPage: true });
    // The raw data: lines are one click away.
    expect(await page.isVisible("#stream-text")).toBe(false);
    expect(await page.textContent("#stream-text")).toContain('data: {"id":"chatcmpl-');
    await page.click("#stream-box summary");
    expect(await page.isVisible("#stream-text")).toBe(true);
  });

  it("runs a job submitted from the form and shows its output", async () => {
    const id = await submit("local", { input: { text: "hello" } });
    await statusIs("COMPLETED");
    // The status can be drawn a moment before the output: wait for the output itself.
    await page.locator("#job-output", { hasText: "HELLO" }).waitFor({ timeout: WAIT_MS });
    expect(JSON.parse((await page.textContent("#job-output"))!)).toEqual({ echo: "HELLO" });
    expect(h.harness.job(id)).toMatchObject({ status: "COMPLETED", kind: "run", output: { echo: "HELLO" } });
    await page.locator(`#jobs tr[data-job="${id}"]`, { hasText: "COMPLETED" }).waitFor({ timeout: WAIT_MS });
    if (SCREENSHOTS) await page.screenshot({ path: `${DOCS}dashboard-job.png`, fullPage: true });
  });

  it("shows a streaming job's tokens while it runs, then the rest when it ends", async () => {
    gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const id = await submit("stream", { input: { words: ["alpha", "beta", "gamma", "delta"] } });
    await page.locator("#stream-text", { hasText: /^alpha beta$/ }).waitFor({ timeout: WAIT_MS });
    // The handler is parked at its gate: the tokens arrived while the job runs.
    await statusIs("IN_PROGRESS");
    expect(h.harness.job(id)?.status).toBe("IN_PROGRESS");
    if (SCREENSHOTS) await page.screenshot({ path: `${DOCS}dashboard-stream.png`, fullPage: true });
    openGate();
    await statusIs("COMPLETED");
    expect(await page.textContent("#stream-text")).toBe("alpha beta gamma delta");
    expect(await page.textContent("#stream-count")).toBe("(4 chunks)");
    // Each chunk's own handler metrics, as they were when it was yielded.
    expect(await page.locator("#chunk-metrics tbody td.metrics").allTextContents()).toEqual([
      "words=1",
      "words=2",
      "words=3",
      "words=4",
    ]);
  });

  it("cancels a running job from the page", async () => {
    const id = await submit("local", { input: { holdUntilCancelled: true } });
    await statusIs("IN_PROGRESS");
    expect(await page.isDisabled("#cancel-job")).toBe(false);
    await page.click("#cancel-job");
    await statusIs("CANCELLED");
    expect(h.harness.job(id)?.status).toBe("CANCELLED");
    await page
      .locator(`#endpoints tr[data-endpoint="local"] td.cancelled`, { hasText: /^1$/ })
      .waitFor({ timeout: WAIT_MS });
  });

  it("lays out a failed job's progress and error report, and retries it", async () => {
    const id = await submit("local", { input: { fail: true } });
    await statusIs("FAILED");
    expect(await page.locator("#job-progress li").allTextContents()).toEqual(['{"step":1}', '{"step":2}']);
    expect(await page.textContent("#job-failure .failure-type")).toBe("RangeError");
    expect(await page.textContent("#job-failure .failure-message")).toBe("the dial only goes to 10");
    expect(await page.textContent("#job-failure .failure-worker")).toBe("local-worker-1");
    expect(await page.textContent("#job-traceback")).toBe(TRACEBACK);
    expect(await page.isHidden("#job-output-box")).toBe(true);
    if (SCREENSHOTS) await page.screenshot({ path: `${DOCS}dashboard-error.png`, fullPage: true });
    // Retry runs it again (and it fails again): the page follows it back through the queue.
    const failedBefore = Number(await page.textContent(`#endpoints tr[data-endpoint="local"] td.failed`));
    await page.click("#retry-job");
    await page
      .locator(`#endpoints tr[data-endpoint="local"] td.failed`, {
        hasText: new RegExp(`^${failedBefore + 1}$`),
      })
      .waitFor({ timeout: WAIT_MS });
    await statusIs("FAILED");
    expect(h.harness.job(id)?.status).toBe("FAILED");
    expect(await page.locator("#job-progress li").allTextContents()).toEqual(['{"step":1}', '{"step":2}']);
  });

  it("shows the workers and each endpoint's queue depth, normal and low priority", async () => {
    await page
      .locator(`#workers tr[data-worker="local-worker-1"] td.state`, { hasText: /^connected$/ })
      .waitFor({ timeout: WAIT_MS });
    await page
      .locator(`#workers tr[data-worker="stream-worker-1"] td.state`, { hasText: /^connected$/ })
      .waitFor({ timeout: WAIT_MS });
    // Its start-up phases, once ready (docs/harness.md, "Workers starting"): this handler has no
    // fitness checks (no healthCheck, no built-in checks in a test harness), so only runlet's own phase.
    expect(await page.innerText(`#workers tr[data-worker="local-worker-1"] td.startup`)).toMatch(
      /^ready in \d+ ms \(runlet \d+ ms\)$/,
    );
    h.harness.enqueue("parked", { input: {} });
    h.harness.enqueue("parked", { input: {} });
    h.harness.enqueue("parked", { input: {}, policy: { lowPriority: true } });
    await page
      .locator(`#endpoints tr[data-endpoint="parked"] td.queue`, { hasText: /^2 \/ 1$/ })
      .waitFor({ timeout: WAIT_MS });
    // The column says which number is which.
    expect(await page.innerText("#endpoints thead th:nth-child(2)")).toBe("queue\nnormal / low");
    await page.selectOption("#status-filter", "IN_QUEUE");
    await page.locator("#jobs tbody tr").nth(2).waitFor({ timeout: WAIT_MS });
    expect(await page.locator("#jobs tbody tr td .status").allTextContents()).toEqual([
      "IN_QUEUE",
      "IN_QUEUE",
      "IN_QUEUE",
    ]);
    await page.selectOption("#status-filter", "");
    if (SCREENSHOTS) {
      await page.click("#close-job");
      await page.screenshot({ path: `${DOCS}dashboard-overview.png`, fullPage: true });
    }
  });

  it("shows no data to a page without the key, or with a wrong one", async () => {
    const stranger = await browser.newPage();
    try {
      await stranger.goto(h.harness.dashboardUrl!);
      await stranger.locator("#locked").waitFor({ state: "visible", timeout: WAIT_MS });
      const answer = await stranger.evaluate(async () => {
        const res = await fetch("api/state");
        return { status: res.status, body: await res.json() };
      });
      expect(answer).toEqual({
        status: 401,
        body: { error: "missing or wrong API key: the dashboard needs the harness's main key", status: 401 },
      });
      await stranger.goto(`${h.harness.dashboardUrl}#token=wrong`);
      await stranger.reload();
      await stranger
        .locator("#key-error", { hasText: "That key was refused." })
        .waitFor({ timeout: WAIT_MS });
      expect(await stranger.locator("#jobs tbody tr").count()).toBe(0);
      expect(await stranger.isHidden("#app")).toBe(true);
    } finally {
      await stranger.close();
    }
  });
});
