import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { logSink, testHarness, workerFor } from "./helpers.js";

/** Failure paths of issue 12: each one ends as that job's failure, never as a crash or cross-talk. */
describe("failure paths of a job", () => {
  it("fails a job whose input schema throws inside .transform() or .refine(), naming the field, and keeps running", async () => {
    await using h = await testHarness();
    const sink = logSink();
    const handler = defineHandler({
      concurrency: 2,
      input: z.object({
        text: z.string().transform((value) => {
          if (value === "boom") throw new Error("transform exploded");
          return value.toUpperCase();
        }),
        n: z
          .number()
          .optional()
          .refine((value) => {
            if (value === 13) throw new TypeError("refine exploded");
            return true;
          }),
      }),
      handler: ({ input }) => ({ text: input.text }),
    });
    await using _w = await workerFor(h, handler, { sink });
    const bad = h.enqueue("local", { input: { text: "boom" } });
    const badRefine = h.enqueue("local", { input: { text: "ok", n: 13 } });
    const good = h.enqueue("local", { input: { text: "fine" } });
    const badJob = await h.waitForJob(bad);
    const badRefineJob = await h.waitForJob(badRefine);
    const goodJob = await h.waitForJob(good);
    expect(badJob.status).toBe("FAILED");
    expect(badJob.error).toBe(
      "input is invalid:\n✖ the input schema threw Error: transform exploded\n  → at text",
    );
    expect(badRefineJob.status).toBe("FAILED");
    expect(badRefineJob.error).toBe(
      "input is invalid:\n✖ the input schema threw TypeError: refine exploded\n  → at n",
    );
    expect(goodJob.status).toBe("COMPLETED");
    expect(goodJob.output).toEqual({ text: "FINE" });
    const finished = sink.lines.filter((l) => l["message"] === "Finished." && l["code"] !== undefined);
    expect(finished.map((l) => l["code"])).toEqual(["RUNLET_INPUT_INVALID", "RUNLET_INPUT_INVALID"]);
    // The worker goes on: a job after the failures still runs.
    const after = h.enqueue("local", { input: { text: "after" } });
    expect((await h.waitForJob(after)).output).toEqual({ text: "AFTER" });
  });
});
