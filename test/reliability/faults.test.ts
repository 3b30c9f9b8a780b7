import pino from "pino";
import { describe, expect, it } from "vitest";
import { startHarness, type WorkerRoute } from "../../src/harness/index.js";
import { defineHandler, startWorker } from "../../src/index.js";
import { waitFor } from "./helpers.js";
import { SeededFaults } from "./seeded-faults.js";

const JOBS = 500;
/** Entries drawn per route, queued up front; a route with more requests fails the test. */
const FAULTS_PER_ROUTE = 20_000;
const ROUTES: readonly WorkerRoute[] = ["job-take", "job-take-batch", "job-done", "job-stream", "ping"];

/** Every third job streams 1–12 items; the others return an object derived from their input. */
function inputOf(n: number) {
  return n % 3 === 0 ? { kind: "stream", n, items: 1 + (n % 12) } : { kind: "plain", n };
}

function* items(n: number, count: number): Generator<string> {
  for (let i = 0; i < count; i++) yield `${n}:${i}:${"~".repeat(i)}`;
}

const handler = defineHandler({
  concurrency: 8,
  handler: ({ input }) => {
    const job = input as { kind: string; n: number; items?: number };
    if (job.kind === "stream") return items(job.n, job.items ?? 0);
    return { n: job.n, square: job.n * job.n, text: `job ${job.n}` };
  },
});

describe("reliability: random faults between the worker and the harness", () => {
  it("injects 429/500/503/drops/delays into a seeded 30 % of job-take, job-done, job-stream and ping requests: 500 jobs each end once, every output intact and in order", async () => {
    await using h = await startHarness({ takeTimeoutMs: 1_000 });
    const faults = new SeededFaults(h, ROUTES, { rate: 0.3, seed: 8, perRoute: FAULTS_PER_ROUTE });
    const worker = await startWorker(handler, {
      env: h.workerEnv("local", { podId: "faulty-net", pingIntervalMs: 100 }),
      logger: pino({ level: "silent" }),
      retryBaseMs: 10,
      retryCapMs: 100,
      shutdownGraceMs: 2_000,
      flushTimeoutMs: 2_000,
    });
    try {
      const ids = Array.from({ length: JOBS }, (_, n) => h.enqueue("local", { input: inputOf(n) }));
      const jobs = await Promise.all(ids.map((id) => h.waitForJob(id, { timeoutMs: 120_000 })));

      for (const [n, job] of jobs.entries()) {
        const input = inputOf(n);
        expect(job.status, `job ${n}: ${job.error ?? ""}`).toBe("COMPLETED");
        expect(job.duplicateResults, `job ${n}`).toBe(0);
        expect(job.latePosts, `job ${n}`).toBe(0);
        if (input.kind === "stream") {
          expect(job.output).toEqual([]);
          expect(job.isStream).toBe(true);
          expect(job.stream.map((c) => c.output)).toEqual([...items(n, input.items ?? 0)]);
          expect(job.stream.map((c) => c.metrics?.["streamIndex"])).toEqual(
            Array.from({ length: input.items ?? 0 }, (_, i) => i),
          );
        } else {
          expect(job.output).toEqual({ n, square: n * n, text: `job ${n}` });
          expect(job.stream).toEqual([]);
        }
      }
      // Exactly one final result was accepted per job.
      const accepted = new Map<string, number>();
      for (const r of h.requests({ route: "job-done" })) {
        if (r.status !== 200) continue;
        const id = r.path.split("/").at(-1)!;
        accepted.set(id, (accepted.get(id) ?? 0) + 1);
      }
      expect(accepted.size).toBe(JOBS);
      expect([...accepted.values()].every((count) => count === 1)).toBe(true);
      expect(h.health("local").jobs).toEqual({
        completed: JOBS,
        failed: 0,
        inProgress: 0,
        inQueue: 0,
        retried: 0,
      });
      // Pings come by the clock, so a fast run may have sent few: wait for the ping that meets the
      // first drawn ping fault.
      await waitFor(
        "the pings to reach the first drawn ping fault",
        () => h.requests({ route: "ping" }).length > faults.firstFault("ping"),
      );
      // Every request met the fault drawn for its place in its route's sequence. How many
      // requests a route gets depends on timing; which fault each one meets does not.
      for (const route of ROUTES) expect(faults.mismatches(route, h.requests({ route }))).toEqual([]);
      // The faults really happened on every route that saw traffic.
      const answered = (route: WorkerRoute) => faults.answeredFaults(route, h.requests({ route }).length);
      for (const route of ["job-done", "job-stream", "ping"] as const) {
        expect(answered(route), route).toBeGreaterThan(0);
      }
      // The worker takes one job or a batch as its free slots allow: the two share the fault check.
      expect(answered("job-take") + answered("job-take-batch")).toBeGreaterThan(0);
      // And a substantial share: there are at least 500 job-done posts, and over 15 % of the first
      // 500 were answered 429/500/503 or dropped (a fact of the seed, checked request by request above).
      expect(h.requests({ route: "job-done" }).length).toBeGreaterThanOrEqual(JOBS);
      expect(faults.answeredFaults("job-done", JOBS)).toBeGreaterThan(JOBS * 0.15);
    } finally {
      await worker.close();
    }
  }, 150_000);
});
