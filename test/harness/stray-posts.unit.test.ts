import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness, send } from "../support/inject.js";
import { logSink } from "../support/workers.js";

/**
 * Only the worker the record names may change a running job (docs/harness.md, "Posts from a worker
 * that does not hold the job"). Workers are played by hand with plain requests, in memory
 * (test/support/inject.ts); the heartbeat lapse that moves the job runs on a ManualClock.
 */
const HEARTBEAT_TIMEOUT_MS = 1_000;

async function post(
  h: Harness,
  route: "job-done" | "job-stream",
  workerId: string,
  jobId: string,
  body: unknown,
) {
  const res = await send(h, `/v2/local/${route}/${workerId}/${jobId}?isStream=false`, {
    method: "POST",
    headers: { authorization: h.apiKey, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.text() };
}

async function ping(h: Harness, workerId: string, jobId: string): Promise<void> {
  const res = await send(h, `/v2/local/ping/${workerId}?job_id=${jobId}&runpod_version=test`, {
    headers: { authorization: h.apiKey },
  });
  await res.text();
}

describe("harness: posts from a worker that no longer holds the job", () => {
  it("ignores and logs the late result, progress and chunk of a lapsed worker while the job runs on another", async () => {
    const sink = logSink();
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      clock,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      takeTimeoutMs: 2_000,
      logger: pino({ level: "warn" }, sink.stream),
    });
    const id = h.enqueue("local", { input: { n: 1 } });
    expect(await takeJob(h, "local", "first")).toEqual({ id, input: { n: 1 } });
    clock.advance(HEARTBEAT_TIMEOUT_MS);
    expect(h.job(id)?.status).toBe("IN_QUEUE");
    expect(await takeJob(h, "local", "second")).toEqual({ id, input: { n: 1 } });
    await ping(h, "second", id);

    expect(await post(h, "job-done", "first", id, { status: "IN_PROGRESS", output: "old step" })).toEqual({
      status: 200,
      body: "{}",
    });
    expect(await post(h, "job-stream", "first", id, { output: "old chunk" })).toEqual({
      status: 200,
      body: "{}",
    });
    expect(await post(h, "job-done", "first", id, { output: "old result" })).toEqual({
      status: 200,
      body: "{}",
    });

    const during = h.job(id)!;
    expect(during).toMatchObject({ status: "IN_PROGRESS", workerId: "second", progress: [], stream: [] });
    expect(during.strayPosts).toBe(3);
    expect(during.output).toBeUndefined();
    expect(
      sink.lines.map(({ level, msg, jobId, workerId, holder, route }) => [
        level,
        msg,
        jobId,
        workerId,
        holder,
        route,
      ]),
    ).toEqual([
      [40, "ignored a post from a worker that does not hold this job", id, "first", "second", "job-done"],
      [40, "ignored a post from a worker that does not hold this job", id, "first", "second", "job-stream"],
      [40, "ignored a post from a worker that does not hold this job", id, "first", "second", "job-done"],
    ]);

    expect(await postDone(h, id, { output: "new result" }, { workerId: "second" })).toBe(200);
    expect(h.job(id)).toMatchObject({
      status: "COMPLETED",
      output: "new result",
      workerId: "second",
      strayPosts: 3,
    });
  });

  it("leaves a requeued job in the queue when its lapsed worker posts a result before anyone takes it again", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({
      clock,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      takeTimeoutMs: 2_000,
    });
    const id = h.enqueue("local", { input: { n: 2 } });
    expect(await takeJob(h, "local", "first")).toEqual({ id, input: { n: 2 } });
    clock.advance(HEARTBEAT_TIMEOUT_MS);
    expect(await postDone(h, id, { output: "late" }, { workerId: "first" })).toBe(200);
    expect(h.job(id)).toMatchObject({ status: "IN_QUEUE", strayPosts: 1 });
    expect(h.job(id)?.output).toBeUndefined();
    // The job is still there for the next worker.
    expect(await takeJob(h, "local", "second")).toEqual({ id, input: { n: 2 } });
  });
});
