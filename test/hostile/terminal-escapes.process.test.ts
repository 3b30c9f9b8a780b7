import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { followJobs } from "../../src/cli/job-log.js";
import { escapeControl } from "../../src/cli/terminal-text.js";
import { defineHandler } from "../../src/handler/index.js";
import { REPO_ROOT, runCli } from "../support/run-cli.js";
import { logSink, testHarness, waitFor, workerFor } from "../support/workers.js";

// Issue 32, item 5: a client can put terminal escapes in an input that a handler logs or throws;
// `runlet dev` and `runlet test` printed them raw (window title, cursor moves, a forged green
// "COMPLETED" line). Text from a job is now printed with its control characters escaped.

/** Retitles the window, clears the line, returns to its start and forges a green COMPLETED. */
const HOSTILE = "\u001b]0;pwned\u0007\u001b[2K\r\u001b[32mrunlet test: COMPLETED in 1 ms\u001b[0m\u202e";
const FIXTURE = join(REPO_ROOT, "test/fixtures/hostile-text.ts");
/** Any terminal control character but line feed and tab. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: what the test looks for
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/;

const echoesAndThrows = defineHandler({
  handler: ({ input, log }) => {
    const { text, fail } = input as { text: string; fail?: boolean };
    log.info(text);
    log.info({ note: text }, "with a field");
    if (fail) throw new Error(text);
    return { text };
  },
});

describe("text from a job reaches the terminal escaped (issue 32)", () => {
  it("escapes control characters and nothing else", () => {
    expect(escapeControl(`a\tb\nc${HOSTILE}`)).toBe(
      "a\tb\nc\\u001b]0;pwned\\u0007\\u001b[2K\\u000d\\u001b[32mrunlet test: COMPLETED in 1 ms\\u001b[0m\\u202e",
    );
    expect(escapeControl("plain ünïcode 日本 ✓")).toBe("plain ünïcode 日本 ✓");
  });

  it("runlet dev's job log: worker lines, outputs and failures", async () => {
    await using h = await testHarness();
    const printed: string[] = [];
    const sink = logSink();
    const log = followJobs(h, (line) => printed.push(line));
    try {
      await using _w = await workerFor(h, echoesAndThrows, { sink });
      const ok = h.enqueue("local", { input: { text: HOSTILE } });
      const bad = h.enqueue("local", { input: { text: HOSTILE, fail: true } });
      await h.waitForJob(ok);
      await h.waitForJob(bad);
      await waitFor("the worker's lines", () => sink.text().includes("with a field"));
      for (const line of sink.text().split("\n")) if (line !== "") log.workerLine("[w1] ", line);
    } finally {
      log.stop();
    }
    const all = printed.join("\n");
    expect(all).toContain("\\u001b]0;pwned");
    expect(all).toContain("FAILED");
    expect(RAW_CONTROL.test(all)).toBe(false);
  });

  describe("runlet test", () => {
    for (const fail of [false, true]) {
      it(`prints a job's text escaped when the job ${fail ? "fails" : "completes"}`, async () => {
        const input = JSON.stringify({ input: { text: HOSTILE, fail } });
        const r = await runCli(["test", FIXTURE, "--input", input]);
        expect(r.code, r.stderr).toBe(fail ? 1 : 0);
        expect(r.stderr).toContain("pwned");
        expect(RAW_CONTROL.test(r.stdout), r.stdout).toBe(false);
        expect(RAW_CONTROL.test(r.stderr), r.stderr).toBe(false);
      });
    }
  });
});
