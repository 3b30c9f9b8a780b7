import { describe, expect, it } from "vitest";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";
import { waitFor } from "../support/wait-for.js";

/**
 * docs/protocol.md, "Heartbeat": only pings prove a worker alive. These workers are played by hand with plain
 * requests, so nothing but the test decides what they send; the heartbeat timeout runs on a ManualClock.
 * The routes run in memory (test/support/inject.ts), with the platform's rule (`keepAliveBy: "pings"`, not
 * the in-memory default): the lapse is timed by the clock, not the socket.
 */
const HEARTBEAT_TIMEOUT_MS = 1_000;

/** A job-stop long poll by `workerId`, held by the harness until it answers (ids, or [] on 204). */
function holdStopPoll(h: Harness, workerId: string): Promise<{ status: number; ids: string[] }> {
  return send(h, `/v2/local/job-stop/${workerId}`, { headers: { authorization: h.apiKey } }).then(
    async (res) => ({
      status: res.status,
      ids: res.status === 200 ? ((await res.json()) as { jobsToStop: string[] }).jobsToStop : [],
    }),
  );
}

/** Waits until the harness holds a job-stop poll of `workerId` open. */
async function stopPollHeld(h: Harness, workerId: string): Promise<void> {
  await waitFor(`a held job-stop poll of ${workerId}`, () =>
    h.requests({ route: "job-stop" }).some((r) => r.path.endsWith(`/${workerId}`) && r.status === "pending"),
  );
}

async function progress(h: Harness, workerId: string, jobId: string, output: unknown): Promise<number> {
  const res = await send(h, `/v2/local/job-done/${workerId}/${jobId}?isStream=false`, {
    method: "POST",
    headers: { authorization: h.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ status: "IN_PROGRESS", output }),
  });
  await res.text();
  return res.status;
}

async function ping(h: Harness, workerId: string, jobId: string): Promise<number> {
  const res = await send(h, `/v2/local/ping/${workerId}?job_id=${jobId}&runpod_version=test`, {
    headers: { authorization: h.apiKey },
  });
  await res.text();
  return res.status;
}

describe("harness heartbeat: only pings keep a worker alive", () => {
  it("lapses a worker that holds its job-stop poll open and posts progress but never pings, and requeues its job", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      keepAliveBy: "pings",
      clock,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      takeTimeoutMs: 30_000,
    });
    const id = h.enqueue("local", { input: { n: 1 } });
    expect(await takeJob(h, "local", "mute")).toEqual({ id, input: { n: 1 } });
    const stop = holdStopPoll(h, "mute");
    await stopPollHeld(h, "mute");

    clock.advance(600);
    expect(await progress(h, "mute", id, { step: 1 })).toBe(200);
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    clock.advance(HEARTBEAT_TIMEOUT_MS - 600);

    expect(h.job(id)?.status).toBe("IN_QUEUE");
    expect(h.job(id)?.progress).toEqual([{ step: 1 }]);
    expect(h.health("local")).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 1, retried: 1 },
      workers: { idle: 0, running: 0, initializing: 0, ready: 0, throttled: 0, unhealthy: 0 },
    });
    // Its held job-stop poll is answered with nothing: the job is no longer its own.
    expect(await stop).toEqual({ status: 204, ids: [] });
    // The requeued job goes to the next worker that asks.
    expect(await takeJob(h, "local", "next")).toEqual({ id, input: { n: 1 } });
  });

  it("keeps a worker that pings while it holds its job-stop poll open, however long it runs", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      keepAliveBy: "pings",
      clock,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      takeTimeoutMs: 30_000,
    });
    const id = h.enqueue("local", { input: { n: 2 } });
    expect(await takeJob(h, "local", "alive")).toEqual({ id, input: { n: 2 } });
    const stop = holdStopPoll(h, "alive");
    await stopPollHeld(h, "alive");

    for (let i = 0; i < 10; i++) {
      clock.advance(HEARTBEAT_TIMEOUT_MS - 1);
      expect(await ping(h, "alive", id)).toBe(200);
    }
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    expect(h.job(id)?.workerId).toBe("alive");
    expect(h.health("local").jobs.retried).toBe(0);
    expect(h.health("local").workers).toMatchObject({ idle: 0, running: 1 });
    expect(h.requests({ route: "job-stop" }).map((r) => r.status)).toEqual(["pending"]);

    // Once its pings stop, it lapses like any silent worker.
    clock.advance(HEARTBEAT_TIMEOUT_MS);
    expect(h.job(id)?.status).toBe("IN_QUEUE");
    expect(await stop).toEqual({ status: 204, ids: [] });
  });

  it("counts a lapse from a worker's first request when it never pings, even while a job-take of it is held", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      keepAliveBy: "pings",
      clock,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      takeTimeoutMs: 30_000,
    });
    const held = takeJob(h, "local", "idle-mute");
    await waitFor("the held job-take", () =>
      h.requests({ route: "job-take" }).some((r) => r.status === "pending"),
    );
    expect(h.health("local").workers).toMatchObject({ idle: 1, running: 0 });
    clock.advance(HEARTBEAT_TIMEOUT_MS);
    // Its held take answers 204, so a job queued afterwards is not handed to a dead worker.
    expect(await held).toBeUndefined();
    expect(h.health("local").workers).toMatchObject({ idle: 0, running: 0 });
    const id = h.enqueue("local", { input: {} });
    expect(h.job(id)?.status).toBe("IN_QUEUE");
  });
});
