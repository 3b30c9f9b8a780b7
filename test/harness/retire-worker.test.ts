import { describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../../src/harness/index.js";
import { EndpointQueue, MAX_RETIRED_WORKERS } from "../../src/harness/jobs/endpoint-queue.js";
import { postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";
import { waitFor } from "../support/wait-for.js";

/**
 * Harness.retireWorker (docs/harness.md): a worker being stopped gets no new job. Its held take is
 * answered with nothing at once, its later takes get nothing, and a job it already holds stays its
 * own. The workers are played by hand with plain requests, so only the test decides what they send.
 * Takes are held for a minute: an answer that comes before a job could reach it is the retirement's.
 */
const HOLD_MS = 60_000;

/** Waits until the harness holds a job-take of `workerId` open. */
async function takeHeld(h: Harness, workerId: string): Promise<void> {
  await waitFor(`a held job-take of ${workerId}`, () =>
    h.requests({ route: "job-take" }).some((r) => r.path.endsWith(`/${workerId}`) && r.status === "pending"),
  );
}

async function ping(h: Harness, workerId: string, jobIds: readonly string[]): Promise<number> {
  const res = await send(h, `/v2/local/ping/${workerId}?job_id=${jobIds.join(",")}&runpod_version=test`, {
    headers: { authorization: h.apiKey },
  });
  await res.text();
  return res.status;
}

describe("retiring a worker", () => {
  it("answers its held take with nothing at once, gives its later takes nothing, and hands the job to another worker", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: HOLD_MS });
    const held = takeJob(h, "local", "old");
    await takeHeld(h, "old");
    h.retireWorker("local", "old");
    // Enqueued while the old take may still be in flight: were it held, it would get this job.
    const id = h.enqueue("local", { input: { n: 1 } });
    expect(await held).toBeUndefined();
    expect(h.job(id)?.status).toBe("IN_QUEUE");
    // Later takes of the retired worker, one job or a batch, get nothing though a job waits.
    expect(await takeJob(h, "local", "old")).toBeUndefined();
    const batch = await send(h, "/v2/local/job-take-batch/old?batch_size=4", {
      headers: { authorization: h.apiKey },
    });
    expect(batch.status).toBe(204);
    expect(h.job(id)?.status).toBe("IN_QUEUE");
    expect(h.requests({ route: "job-take" }).map((r) => r.status)).toEqual([204, 204]);
    // Another worker takes it.
    expect(await takeJob(h, "local", "new")).toEqual({ id, input: { n: 1 } });
    expect(h.job(id)).toMatchObject({ status: "IN_PROGRESS", workerId: "new" });
  });

  it("leaves a job already handed to it its own: its pings, progress and result count", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: HOLD_MS });
    const id = h.enqueue("local", { input: { n: 2 } });
    expect(await takeJob(h, "local", "old")).toEqual({ id, input: { n: 2 } });
    h.retireWorker("local", "old");
    expect(h.job(id)).toMatchObject({ status: "IN_PROGRESS", workerId: "old" });
    expect(await ping(h, "old", [id])).toBe(200);
    expect(await postDone(h, id, { status: "IN_PROGRESS", output: "half" }, { workerId: "old" })).toBe(200);
    expect(await postDone(h, id, { output: "done" }, { workerId: "old" })).toBe(200);
    expect(h.job(id)).toMatchObject({
      status: "COMPLETED",
      workerId: "old",
      output: "done",
      progress: ["half"],
      strayPosts: 0,
    });
  });

  it("touches no other worker and no other endpoint, and ignores an unknown endpoint", async () => {
    await using h = inMemoryHarness({
      takeTimeoutMs: HOLD_MS,
      endpoints: [{ id: "local" }, { id: "other" }],
    });
    const mine = takeJob(h, "local", "old");
    const same = takeJob(h, "other", "old");
    const another = takeJob(h, "local", "w2");
    await waitFor(
      "three held takes",
      () =>
        h.requests({ route: "job-take" }).every((r) => r.status === "pending") &&
        h.requests({ route: "job-take" }).length === 3,
    );
    h.retireWorker("nowhere", "old");
    h.retireWorker("local", "old");
    expect(await mine).toBeUndefined();
    const a = h.enqueue("local", { input: "a" });
    const b = h.enqueue("other", { input: "b" });
    expect(await another).toEqual({ id: a, input: "a" });
    // The same worker id on another endpoint was not retired there.
    expect(await same).toEqual({ id: b, input: "b" });
  });

  it("is done by the scaler to a worker it stops: one that asked with stopPod gets no new job", async () => {
    const started: string[] = [];
    await using h = await startHarness({
      takeTimeoutMs: 200,
      endpoints: [
        {
          id: "local",
          minWorkers: 1,
          spawn: async (env) => {
            started.push(env["RUNPOD_POD_ID"] ?? "");
            return { close: async () => {} };
          },
        },
      ],
    });
    await waitFor("the first worker", () => started.length === 1);
    const first = h.enqueue("local", { input: 1 });
    expect(await takeJob(h, "local", "local-worker-1")).toEqual({ id: first, input: 1 });
    expect(await postDone(h, first, { output: 1, stopPod: true }, { workerId: "local-worker-1" })).toBe(200);
    await waitFor("its replacement", () => started.length === 2);
    const next = h.enqueue("local", { input: 2 });
    // The stopping worker asks again before it is gone: nothing for it.
    expect(await takeJob(h, "local", "local-worker-1")).toBeUndefined();
    expect(await takeJob(h, "local", "local-worker-2")).toEqual({ id: next, input: 2 });
  });
});

describe("EndpointQueue's retired workers", () => {
  it("remembers the latest MAX_RETIRED_WORKERS, the oldest forgotten first", () => {
    const queue = new EndpointQueue({ executionTimeoutMs: 1_000 }, () => []);
    for (let i = 0; i <= MAX_RETIRED_WORKERS; i++) queue.retire(`w${i}`);
    expect(queue.isRetired("w0")).toBe(false);
    expect(queue.isRetired("w1")).toBe(true);
    expect(queue.isRetired(`w${MAX_RETIRED_WORKERS}`)).toBe(true);
    // Retiring one again makes it the newest.
    queue.retire("w1");
    queue.retire("x");
    expect(queue.isRetired("w1")).toBe(true);
    expect(queue.isRetired("w2")).toBe(false);
  });
});
