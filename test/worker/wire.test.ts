import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { USER_AGENT } from "../../src/version.js";
import { memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

// What the worker sends: over loopback where the subject is the wire or a ping (the heartbeat
// thread pings over sockets of its own); the take URLs' queries are read in memory.
describe("the worker's requests on the wire", () => {
  it("sends the raw key, its User-Agent and X-Request-ID per job, and exact job-done bodies and queries", async () => {
    // On loopback: the subject is the bytes a real socket carries (headers as the HTTP client sets them).
    await using h = await testHarness();
    await using w = await workerFor(
      h,
      defineHandler({
        handler: ({ progress }) => {
          progress(0.5);
          return { ok: true };
        },
      }),
      { podId: "pod-1" },
    );
    const id = h.enqueue("local", { input: { a: 1 } });
    await h.waitForJob(id);
    await w.close();

    const takes = h.requests({ route: "job-take" });
    expect(takes.length).toBeGreaterThan(0);
    for (const take of takes) {
      expect(take.method).toBe("GET");
      expect(take.path).toBe("/v2/local/job-take/pod-1");
      expect(take.headers["authorization"]).toBe(h.apiKey);
      expect(take.headers["user-agent"]).toBe(USER_AGENT);
      expect(take.headers["x-request-id"]).toBeUndefined();
      expect(take.query["gpu"]).toBe("LOCAL");
    }
    expect(takes[0]!.query["job_in_progress"]).toBe("0");

    const done = h.requests({ route: "job-done" });
    expect(done.map((r) => r.body)).toEqual([
      '{"status":"IN_PROGRESS","output":0.5}',
      '{"output":{"ok":true}}',
    ]);
    for (const post of done) {
      expect(post.method).toBe("POST");
      expect(post.path).toBe(`/v2/local/job-done/pod-1/${id}`);
      expect(post.query).toEqual({ gpu: "LOCAL", isStream: "false" });
      expect(post.headers["authorization"]).toBe(h.apiKey);
      expect(post.headers["x-request-id"]).toBe(id);
      // The label production has accepted for years (docs/protocol.md, "Results"); the body is still JSON text.
      expect(post.headers["content-type"]).toBe("application/x-www-form-urlencoded");
      expect(post.headers["charset"]).toBe("utf-8");
      expect(post.headers["user-agent"]).toBe(USER_AGENT);
    }
  });

  it("takes a batch with batch_size = free slots and reports job_in_progress exactly", async () => {
    await using h = memoryHarness();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const ids = [h.enqueue("local", { input: 1 }), h.enqueue("local", { input: 2 })];
    await using _w = await workerFor(
      h,
      defineHandler({
        concurrency: 3,
        handler: async ({ input }) => {
          await gate;
          return input;
        },
      }),
      { podId: "pod-b" },
    );
    // Both jobs came in one batch of up to 3; the one free slot left is asked for with job-take.
    await waitFor("a single take after the batch", () =>
      h.requests().some((r) => r.route === "job-take" && r.query["job_in_progress"] === "1"),
    );
    const batches = h.requests({ route: "job-take-batch" });
    expect(batches[0]!.path).toBe("/v2/local/job-take-batch/pod-b");
    expect(batches[0]!.query["batch_size"]).toBe("3");
    expect(batches[0]!.query["job_in_progress"]).toBe("0");
    const single = h.requests({ route: "job-take" });
    expect(
      single.every((r) => r.query["job_in_progress"] === "1" && r.query["batch_size"] === undefined),
    ).toBe(true);
    release();
    const jobs = await Promise.all(ids.map((id) => h.waitForJob(id)));
    expect(jobs.map((j) => j.output)).toEqual([1, 2]);
    // Idle again: the next takes say so and ask for every slot.
    await waitFor("an idle batch take", () => {
      const last = h.requests({ route: "job-take-batch" }).at(-1);
      return last !== undefined && last.query["job_in_progress"] === "0" && last !== batches[0];
    });
  });

  it("pings with the running job ids and runlet's version, and without job_id when idle", async () => {
    await using h = await testHarness();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    await using _w = await workerFor(h, defineHandler({ handler: () => gate }), {
      podId: "pod-p",
      pingIntervalMs: 100,
    });
    await waitFor("an idle ping", () => h.requests({ route: "ping" }).length > 0);
    const idle = h.requests({ route: "ping" })[0]!;
    expect(idle.path).toBe("/v2/local/ping/pod-p");
    expect(idle.query["job_id"]).toBeUndefined();
    expect(idle.query["runpod_version"]).toMatch(/^runlet\/\d/);
    expect(idle.headers["authorization"]).toBe(h.apiKey);
    const id = h.enqueue("local", { input: {} });
    await waitFor("a ping naming the job", () =>
      h.requests({ route: "ping" }).some((r) => r.query["job_id"] === id),
    );
    release();
    await h.waitForJob(id);
  });
  it("names every held job in its pings past the job table's first 64 slots, and drops each as it ends", async () => {
    await using h = await testHarness();
    const gates = new Map<number, () => void>();
    await using _w = await workerFor(
      h,
      defineHandler({
        concurrency: 100,
        handler: ({ input }) =>
          new Promise<void>((resolve) => {
            gates.set((input as { n: number }).n, resolve);
          }),
      }),
      { podId: "pod-many", pingIntervalMs: 50 },
    );
    // More jobs than the table's first size (64 slots), so it grows while jobs hold their slots.
    const ids = Array.from({ length: 100 }, (_, n) => h.enqueue("local", { input: { n } }));
    const named = (r: { query: Readonly<Record<string, string>> }) => (r.query["job_id"] ?? "").split(",");
    const sinceNow = () => h.requests({ route: "ping" }).length;
    await waitFor("all 100 jobs running", () => gates.size === 100);
    let from = sinceNow();
    await waitFor("a ping naming all 100 jobs", () =>
      h
        .requests({ route: "ping" })
        .slice(from)
        .some((r) => named(r).length === 100 && ids.every((id) => named(r).includes(id))),
    );
    // The first 50 end: later pings name exactly the other 50.
    for (let n = 0; n < 50; n++) gates.get(n)!();
    await Promise.all(ids.slice(0, 50).map((id) => h.waitForJob(id)));
    from = sinceNow();
    await waitFor("a ping naming the 50 jobs left", () =>
      h
        .requests({ route: "ping" })
        .slice(from)
        .some((r) => [...named(r)].sort().join() === [...ids.slice(50)].sort().join()),
    );
    for (let n = 50; n < 100; n++) gates.get(n)!();
    await Promise.all(ids.map((id) => h.waitForJob(id)));
  });
});
