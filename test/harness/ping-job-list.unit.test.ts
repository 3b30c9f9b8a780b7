import { describe, expect, it } from "vitest";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { pollStop, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";

/**
 * docs/protocol.md, "Taking jobs" and "Heartbeat": a ping's `job_id` list is how the platform knows what a worker runs. A
 * held job that a pinging worker's pings leave out for `heartbeatTimeoutMs` (from the hand-out, or
 * from the first ping that left it out after one listed it) is lost: requeued once, failed the
 * second time. Workers are played by hand with plain requests, in memory
 * (test/support/inject.ts); the timeout runs on a ManualClock, and
 * every clock step stays below it so the worker itself never lapses.
 */
const HEARTBEAT_TIMEOUT_MS = 1_000;

/** A ping by `workerId` listing `jobIds`; with none, `job_id` is left out, as an idle worker sends it. */
async function ping(h: Harness, workerId: string, jobIds: readonly string[]): Promise<number> {
  const list = jobIds.length === 0 ? "" : `job_id=${encodeURIComponent(jobIds.join(","))}&`;
  const res = await send(h, `/v2/local/ping/${workerId}?${list}runpod_version=test`, {
    headers: { authorization: h.apiKey },
  });
  await res.text();
  return res.status;
}

/** Moves the clock by `ms`, then pings; returns the job's status after the ping. */
async function stepAndPing(
  h: Harness,
  clock: ManualClock,
  ms: number,
  jobId: string,
  workerId: string,
  listed: readonly string[],
): Promise<string | undefined> {
  clock.advance(ms);
  expect(await ping(h, workerId, listed)).toBe(200);
  return h.job(jobId)?.status;
}

function harness(clock: ManualClock): Harness {
  return inMemoryHarness({ clock, heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS, takeTimeoutMs: 30_000 });
}

describe("harness: a job its worker's pings no longer list is lost", () => {
  it("requeues a job a pinging worker never lists once heartbeatTimeoutMs has passed since the hand-out, and fails it when lost again", async () => {
    const clock = new ManualClock();
    await using h = harness(clock);
    const id = h.enqueue("local", { input: { n: 1 } });
    // A restarted process under the same worker id: the job-take was answered, but its pings name nothing.
    expect(await takeJob(h, "local", "w1")).toEqual({ id, input: { n: 1 } });
    expect(await stepAndPing(h, clock, 0, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 600, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 399, id, "w1", [])).toBe("IN_PROGRESS");
    expect(h.health("local")).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 1, inQueue: 0, retried: 0 },
      workers: { idle: 0, running: 1, initializing: 0, ready: 0, throttled: 0, unhealthy: 0 },
    });
    // 1000 ms after the hand-out, a ping still without the job: lost, back in the queue.
    expect(await stepAndPing(h, clock, 1, id, "w1", [])).toBe("IN_QUEUE");
    expect(h.job(id)?.workerId).toBeUndefined();
    // The worker pinged throughout, so it stays connected, now holding nothing.
    expect(h.health("local")).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 1, retried: 1 },
      workers: { idle: 1, running: 0, initializing: 0, ready: 1, throttled: 0, unhealthy: 0 },
    });

    // Taken again, and again its pings name only other jobs: the second loss fails it.
    expect(await takeJob(h, "local", "w1")).toEqual({ id, input: { n: 1 } });
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 500, id, "w1", ["other-job"])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 700, id, "w1", ["other-job"])).toBe("FAILED");
    expect(h.job(id)?.error).toBe(
      "worker w1 stopped listing this job in its pings for 1200 ms, for the second time",
    );
    expect(h.health("local")).toEqual({
      jobs: { completed: 0, failed: 1, inProgress: 0, inQueue: 0, retried: 1 },
      workers: { idle: 1, running: 0, initializing: 0, ready: 1, throttled: 0, unhealthy: 0 },
    });
    // A result arriving afterwards changes nothing.
    expect(await postDone(h, id, { output: "late" })).toBe(200);
    expect(h.job(id)).toMatchObject({ status: "FAILED", duplicateResults: 1 });
  });

  it("never requeues a job its worker lists in every ping, across many clock jumps, and leaves it alone once completed", async () => {
    const clock = new ManualClock();
    await using h = harness(clock);
    const id = h.enqueue("local", { input: { n: 2 } });
    expect(await takeJob(h, "local", "w1")).toEqual({ id, input: { n: 2 } });
    // A ping sent before the take was answered arrives without the job; the next one lists it.
    expect(await stepAndPing(h, clock, 0, id, "w1", [])).toBe("IN_PROGRESS");
    for (let i = 0; i < 50; i++) {
      expect(await stepAndPing(h, clock, 900, id, "w1", i % 2 === 0 ? [id] : ["a", id, "b"])).toBe(
        "IN_PROGRESS",
      );
    }
    expect(h.job(id)?.workerId).toBe("w1");
    expect(await postDone(h, id, { output: { ok: true } })).toBe(200);
    expect(h.job(id)?.status).toBe("COMPLETED");
    // After its result the worker's pings name nothing; the finished job is not touched.
    for (let i = 0; i < 5; i++) expect(await stepAndPing(h, clock, 900, id, "w1", [])).toBe("COMPLETED");
    expect(h.job(id)?.output).toEqual({ ok: true });
    expect(h.health("local")).toEqual({
      jobs: { completed: 1, failed: 0, inProgress: 0, inQueue: 0, retried: 0 },
      workers: { idle: 1, running: 0, initializing: 0, ready: 1, throttled: 0, unhealthy: 0 },
    });
  });

  it("requeues a job heartbeatTimeoutMs after its worker's pings stop listing it, counting from the first ping that left it out", async () => {
    const clock = new ManualClock();
    await using h = harness(clock);
    const id = h.enqueue("local", { input: { n: 3 } });
    expect(await takeJob(h, "local", "w1")).toEqual({ id, input: { n: 3 } });
    expect(await stepAndPing(h, clock, 100, id, "w1", [id])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 900, id, "w1", [id])).toBe("IN_PROGRESS");
    // Left out, then listed again within the timeout: the countdown is cancelled.
    expect(await stepAndPing(h, clock, 900, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 900, id, "w1", [id])).toBe("IN_PROGRESS");
    // Left out for good: the countdown starts at this ping, not at the hand-out 2800 ms ago.
    expect(await stepAndPing(h, clock, 900, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 900, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 99, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 1, id, "w1", [])).toBe("IN_QUEUE");
    expect(h.health("local")).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 1, retried: 1 },
      workers: { idle: 1, running: 0, initializing: 0, ready: 1, throttled: 0, unhealthy: 0 },
    });
    // Another worker takes it and completes it; the first worker's pings do not matter any more.
    expect(await takeJob(h, "local", "w2")).toEqual({ id, input: { n: 3 } });
    expect(await stepAndPing(h, clock, 900, id, "w1", [])).toBe("IN_PROGRESS");
    expect(await stepAndPing(h, clock, 0, id, "w2", [id])).toBe("IN_PROGRESS");
    expect(await postDone(h, id, { output: "done" }, { workerId: "w2" })).toBe(200);
    expect(h.job(id)).toMatchObject({ status: "COMPLETED", output: "done", workerId: "w2" });
  });

  it("leaves a job-stopped job alone when the worker's pings drop it", async () => {
    const clock = new ManualClock();
    await using h = harness(clock);
    const id = h.enqueue("local", { input: { n: 4 } });
    expect(await takeJob(h, "local", "w1")).toEqual({ id, input: { n: 4 } });
    expect(await stepAndPing(h, clock, 100, id, "w1", [id])).toBe("IN_PROGRESS");
    h.stopJob(id);
    expect(await pollStop(h, "w1")).toEqual([id]);
    for (let i = 0; i < 4; i++) expect(await stepAndPing(h, clock, 900, id, "w1", [])).toBe("CANCELLED");
    expect(h.health("local").jobs).toEqual({
      completed: 0,
      failed: 0,
      inProgress: 0,
      inQueue: 0,
      retried: 0,
    });
  });
});
