import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler, JobError, WorkerUnfitError } from "../../src/index.js";
import { gate, logSink, memoryHarness, turn, waitFor, workerFor } from "../support/workers.js";

describe("worker lifecycle events", () => {
  it("reports taken, started, progress, finished, failed, retrying and stopped, in order", async () => {
    await using h = memoryHarness();
    const handler = defineHandler({
      input: z.object({ fail: z.boolean() }),
      handler: ({ input, progress }) => {
        if (input.fail) throw new JobError("bad luck");
        progress({ step: 1 });
        return { ok: true };
      },
    });
    const worker = await workerFor(h, handler);
    const seen: string[] = [];
    const names = ["taken", "started", "progress", "finished", "failed", "retrying", "stopped"] as const;
    for (const name of names) {
      worker.on(name, (event) => {
        const { jobId, ...rest } = event as { jobId?: string } & Record<string, unknown>;
        const detail =
          name === "finished" || name === "failed"
            ? { ...rest, executionTimeMs: typeof rest["executionTimeMs"] }
            : name === "retrying"
              ? { what: rest["what"], status: rest["status"], attempt: rest["attempt"] }
              : rest;
        seen.push(`${name} ${jobId ?? "-"} ${JSON.stringify(detail)}`);
      });
    }
    // A listener that throws is logged and ignored; the job still finishes.
    worker.on("started", () => {
      throw new Error("metrics hook broke");
    });

    const okId = h.enqueue("local", { input: { fail: false } });
    await waitFor("the first job to complete", () => h.job(okId)?.status === "COMPLETED");
    // The failure's post answers 503 once: the worker retries it.
    h.injectFault("job-done", { status: 503 }, 1);
    const badId = h.enqueue("local", { input: { fail: true } });
    await waitFor("the second job to fail", () => h.job(badId)?.status === "FAILED");
    await worker.close();

    expect(seen).toEqual([
      `taken ${okId} {}`,
      `started ${okId} {}`,
      `progress ${okId} {"body":"{\\"step\\":1}"}`,
      `finished ${okId} {"executionTimeMs":"number","metrics":{}}`,
      `taken ${badId} {}`,
      `started ${badId} {}`,
      `failed ${badId} {"executionTimeMs":"number","metrics":{},"code":"RUNLET_JOB_FAILED","message":"bad luck"}`,
      `retrying ${badId} {"what":"the final result","status":503,"attempt":0}`,
      `stopped - {"reason":"closed","exitCode":0}`,
    ]);
  });
});

describe('start-up events (docs/worker.md, "Start-up phases")', () => {
  it("reports the fitness phase, then ready with each phase's ms, before the first take", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const check = gate<boolean>();
    const worker = await workerFor(
      h,
      defineHandler({ healthCheck: () => check.promise, handler: () => "ok" }),
      { sink },
    );
    const seen: string[] = [];
    let phases: Readonly<Record<string, number>> | undefined;
    worker.on("phase", ({ phase, state, ms }) => seen.push(`${phase} ${state} ${typeof ms}`));
    worker.on("ready", (event) => {
      phases = event.phases;
      seen.push(`ready (takes so far: ${h.requests({ route: "job-take" }).length})`);
    });
    await waitFor("the fitness phase to start", () => seen.length > 0);
    await turn();
    expect(seen).toEqual(["fitness started undefined"]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
    check.open(true);
    await waitFor("ready", () => phases);
    await worker.close();
    expect(seen).toEqual(["fitness started undefined", "fitness done number", "ready (takes so far: 0)"]);
    expect(Object.keys(phases!)).toEqual(["runlet", "fitness", "total"]);
    expect(phases!["total"]).toBeGreaterThanOrEqual(phases!["runlet"]!);
    // One log line each, whose fields a parent reading the worker's stdout can follow.
    const lines = sink.lines.filter((l) => l["phase"] !== undefined || l["phases"] !== undefined);
    expect(lines.map((l) => [l["message"], l["phase"], l["phaseState"]])).toEqual([
      ["start-up: fitness…", "fitness", "started"],
      [expect.stringMatching(/^start-up: fitness done in [\d.]+ ms$/), "fitness", "done"],
      ["worker ready", undefined, undefined],
    ]);
    expect(lines[2]!["phases"]).toEqual(phases);
    // The CPU the process used by the end of runlet's phase and by ready, beside the wall times.
    const cpuMs = lines[2]!["cpuMs"] as Record<string, number>;
    expect(Object.keys(cpuMs)).toEqual(["runlet", "total"]);
    expect(cpuMs["runlet"]).toBeGreaterThan(0);
    expect(cpuMs["total"]).toBeGreaterThanOrEqual(cpuMs["runlet"]!);
  });

  it("reports a failed fitness phase and no ready when the health check fails", async () => {
    await using h = memoryHarness();
    const worker = await workerFor(
      h,
      defineHandler({
        healthCheck: () => {
          throw new WorkerUnfitError("gpu", "no device");
        },
        handler: () => "never",
      }),
    );
    const seen: string[] = [];
    worker.on("phase", ({ phase, state }) => seen.push(`${phase} ${state}`));
    worker.on("ready", () => seen.push("ready"));
    expect(await worker.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    expect(seen).toEqual(["fitness started", "fitness failed"]);
  });
});
