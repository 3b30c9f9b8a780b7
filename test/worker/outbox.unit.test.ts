import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { retryPolicy } from "../../src/retry-policy.js";
import { WorkerEventHub, type WorkerEvents } from "../../src/worker/events.js";
import { JobOutbox } from "../../src/worker/job/outbox.js";
import { memoryHarness, waitFor } from "../support/workers.js";
import { type PartsRig, partsRig, RETRY_BASE_MS, RETRY_CAP_MS } from "./job-rig.js";

/**
 * One job's outbox (outbox.ts) through its public methods: posts to the harness in memory (the
 * subject is the outbox, not the socket), faults injected there, back-off on a ManualClock. Every
 * wait between attempts is proven by the `retrying` event and the clock's pending timer, never by
 * a pause.
 */

interface Box {
  readonly outbox: JobOutbox;
  readonly jobId: string;
  readonly giveUp: AbortController;
  readonly retries: WorkerEvents["retrying"][];
  /** Resolves with retry number `n` (from 1) once the outbox announced it. */
  retry(n: number): Promise<WorkerEvents["retrying"]>;
}

async function box(r: PartsRig, retry = r.config.postRetry): Promise<Box> {
  const [job] = await r.take();
  const jobId = job!.id;
  const giveUp = new AbortController();
  const events = new WorkerEventHub(r.log);
  const retries: WorkerEvents["retrying"][] = [];
  events.on("retrying", (event) => retries.push(event));
  const outbox = new JobOutbox({
    jobId,
    http: r.http,
    log: r.log,
    giveUp: giveUp.signal,
    clock: r.clock,
    retry,
    events,
  });
  return {
    outbox,
    jobId,
    giveUp,
    retries,
    retry: (n) => waitFor(`retry ${n}`, () => retries[n - 1]),
  };
}

/** The job's posts as the harness received them: route, status, body. */
function posts(h: Harness, jobId: string): Array<[string, number | string, string]> {
  return h
    .requests()
    .filter((q) => (q.route === "job-done" || q.route === "job-stream") && q.path.includes(jobId))
    .map((q) => [q.route, q.status, q.body]);
}

const chunk = (text: string) => JSON.stringify({ output: text });

describe("JobOutbox", () => {
  it("posts progress, stream chunks and the final result one at a time, in the order queued", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    const streamUrl = r.config.urls.stream(b.jobId)!;
    b.outbox.progress(r.config.urls.done(b.jobId, false), '{"step":1}');
    b.outbox.chunks(streamUrl, [chunk("a"), chunk("b")]);
    b.outbox.progress(r.config.urls.done(b.jobId, false), '{"step":2}');
    b.outbox.chunks(streamUrl, [Buffer.from(chunk("c"))]);
    b.outbox.final(r.config.urls.done(b.jobId, true), '{"output":"done"}', false);
    expect(await b.outbox.done).toBe("delivered");
    expect(posts(h, b.jobId)).toEqual([
      ["job-done", 200, '{"status":"IN_PROGRESS","output":{"step":1}}'],
      ["job-stream", 200, chunk("a")],
      ["job-stream", 200, chunk("b")],
      ["job-done", 200, '{"status":"IN_PROGRESS","output":{"step":2}}'],
      ["job-stream", 200, chunk("c")],
      ["job-done", 200, '{"output":"done"}'],
    ]);
    expect(b.outbox.unpostedStreamBytes).toBe(0);
    expect(b.retries).toEqual([]);
    await r.close();
  });

  it("retries a 5xx after the policy's back-off on the clock, doubling per attempt, and keeps the order", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    h.injectFault("job-done", { status: 503 }, 2);
    b.outbox.progress(r.config.urls.done(b.jobId, false), '{"step":1}');
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":1}', false);
    const first = await b.retry(1);
    expect(first).toMatchObject({ jobId: b.jobId, what: "progress update 1", attempt: 0, status: 503 });
    // Jitter 0.5: the first wait lies in [base/2, base].
    expect(first.waitMs).toBeGreaterThanOrEqual(RETRY_BASE_MS / 2);
    expect(first.waitMs).toBeLessThanOrEqual(RETRY_BASE_MS);
    // One back-off timer and no second attempt until the clock reaches it.
    expect(r.clock.pendingTimers).toBe(1);
    r.clock.advance(first.waitMs - 1);
    expect(r.clock.pendingTimers).toBe(1);
    expect(posts(h, b.jobId)).toHaveLength(1);
    r.clock.advance(1);
    const second = await b.retry(2);
    expect(second).toMatchObject({ what: "progress update 1", attempt: 1, status: 503 });
    expect(second.waitMs).toBeGreaterThanOrEqual(RETRY_BASE_MS);
    expect(second.waitMs).toBeLessThanOrEqual(2 * RETRY_BASE_MS);
    r.clock.advance(second.waitMs);
    expect(await b.outbox.done).toBe("delivered");
    expect(posts(h, b.jobId)).toEqual([
      ["job-done", 503, '{"status":"IN_PROGRESS","output":{"step":1}}'],
      ["job-done", 503, '{"status":"IN_PROGRESS","output":{"step":1}}'],
      ["job-done", 200, '{"status":"IN_PROGRESS","output":{"step":1}}'],
      ["job-done", 200, '{"output":1}'],
    ]);
    expect((await h.waitForJob(b.jobId)).output).toBe(1);
    await r.close();
  });

  it("caps the back-off at retryCapMs however many attempts fail", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    const failures = 6;
    h.injectFault("job-done", { status: 500 }, failures);
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"x"}', false);
    for (let n = 1; n <= failures; n++) {
      const event = await b.retry(n);
      const bound = Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** (n - 1));
      expect([event.attempt, event.waitMs >= bound / 2 && event.waitMs <= bound]).toEqual([n - 1, true]);
      r.clock.advance(event.waitMs);
    }
    expect(await b.outbox.done).toBe("delivered");
    expect(posts(h, b.jobId).map((p) => p[1])).toEqual([500, 500, 500, 500, 500, 500, 200]);
    await r.close();
  });

  it("waits what a 429's Retry-After asks, up to four times the cap", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    h.injectFault("job-done", { status: 429, retryAfterSec: 2 }, 1);
    h.injectFault("job-done", { status: 429, retryAfterSec: 60 }, 1);
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"x"}', false);
    expect((await b.retry(1)).waitMs).toBe(2_000);
    r.clock.advance(2_000);
    expect((await b.retry(2)).waitMs).toBe(4 * RETRY_CAP_MS);
    r.clock.advance(4 * RETRY_CAP_MS);
    expect(await b.outbox.done).toBe("delivered");
    await r.close();
  });

  it("retries a dropped connection as a network error and loses nothing of the stream", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    const streamUrl = r.config.urls.stream(b.jobId)!;
    h.injectFault("job-stream", { status: 200 }, 1); // the first chunk goes through (answered, not applied)
    h.injectFault("job-stream", { drop: true }, 1);
    b.outbox.chunks(streamUrl, [chunk("a"), chunk("b"), chunk("c")]);
    b.outbox.final(r.config.urls.done(b.jobId, true), '{"output":"end"}', false);
    const event = await b.retry(1);
    expect(event).toMatchObject({ what: "stream chunk 2", attempt: 0 });
    expect(event.error).toEqual(expect.any(String));
    expect(event.status).toBeUndefined();
    // Chunks 2 and 3 are still unposted while chunk 2 backs off.
    expect(b.outbox.unpostedStreamBytes).toBe(2 * Buffer.byteLength(chunk("b")));
    r.clock.advance(event.waitMs);
    expect(await b.outbox.done).toBe("delivered");
    expect(posts(h, b.jobId)).toEqual([
      ["job-stream", 200, chunk("a")],
      ["job-stream", "dropped", chunk("b")],
      ["job-stream", 200, chunk("b")],
      ["job-stream", 200, chunk("c")],
      ["job-done", 200, '{"output":"end"}'],
    ]);
    expect(b.outbox.unpostedStreamBytes).toBe(0);
    await r.close();
  });

  it("lets a streaming handler wait until its unposted bytes fall under its budget", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    h.injectFault("job-stream", { status: 502 }, 1);
    b.outbox.chunks(r.config.urls.stream(b.jobId)!, [chunk("a"), chunk("b")]);
    let below = false;
    const waiting = b.outbox.waitBelow(0).then(() => {
      below = true;
    });
    const event = await b.retry(1);
    expect(below).toBe(false);
    r.clock.advance(event.waitMs);
    await waiting;
    expect(b.outbox.unpostedStreamBytes).toBe(0);
    expect(posts(h, b.jobId).map((p) => p[1])).toEqual([502, 200, 200]);
    await r.close();
  });

  it("takes a 4xx as final: a rejected progress update turns the final result into an error", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    h.injectFault("job-done", { status: 400, body: "too odd" }, 1);
    b.outbox.progress(r.config.urls.done(b.jobId, false), '{"step":1}');
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"full"}', true);
    expect(await b.outbox.done).toBe("replaced");
    expect(b.retries).toEqual([]);
    const error = JSON.stringify({
      error: "the platform rejected progress update 1 of this job with HTTP 400; its output is incomplete",
      stopPod: true,
    });
    expect(posts(h, b.jobId)).toEqual([
      ["job-done", 400, '{"status":"IN_PROGRESS","output":{"step":1}}'],
      ["job-done", 200, error],
    ]);
    expect(r.sink.lines.filter((l) => l["code"] === "RUNLET_REPORT_REJECTED").map((l) => l["msg"])).toEqual([
      "the platform rejected progress update 1 with HTTP 400",
    ]);
    await r.close();
  });

  it("replaces a rejected final result with a short error, and says 'rejected' when that is refused too", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const replaced = await box(r);
    h.injectFault("job-done", { status: 413 }, 1);
    replaced.outbox.final(r.config.urls.done(replaced.jobId, false), '{"output":"big"}', false);
    expect(await replaced.outbox.done).toBe("replaced");
    const body = '{"output":"big"}';
    expect(posts(h, replaced.jobId).map((p) => [p[1], p[2]])).toEqual([
      [413, body],
      [
        200,
        JSON.stringify({
          error: `the platform rejected this job's result (${Buffer.byteLength(body)} bytes) with HTTP 413`,
        }),
      ],
    ]);
    const rejected = await box(r);
    h.injectFault("job-done", { status: 413 }, 2);
    rejected.outbox.final(r.config.urls.done(rejected.jobId, false), body, false);
    expect(await rejected.outbox.done).toBe("rejected");
    expect(posts(h, rejected.jobId).map((p) => p[1])).toEqual([413, 413]);
    await r.close();
  });

  it("stops retrying after the policy's maxRetries and treats the last answer as final", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r, retryPolicy(r.config.postRetry, { maxRetries: 1, jitter: 0 }));
    h.injectFault("job-done", { status: 503 }, 3);
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"x"}', false);
    expect((await b.retry(1)).waitMs).toBe(RETRY_BASE_MS);
    r.clock.advance(RETRY_BASE_MS);
    // The second 503 exhausts the result's post; the short error report gets its own retry.
    expect(await b.retry(2)).toMatchObject({ attempt: 0, what: "the final result", status: 503 });
    r.clock.advance(RETRY_BASE_MS);
    expect(await b.outbox.done).toBe("replaced");
    expect(posts(h, b.jobId).map((p) => p[1])).toEqual([503, 503, 503, 200]);
    expect((await h.waitForJob(b.jobId)).error).toBe(
      "the platform rejected this job's result (14 bytes) with HTTP 503",
    );
    await r.close();
  });

  it("gives up at once when the give-up signal fires during a back-off, posting nothing more", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    h.injectFault("job-done", { status: 503 }, 1);
    b.outbox.progress(r.config.urls.done(b.jobId, false), '{"step":1}');
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"x"}', false);
    await b.retry(1);
    b.giveUp.abort();
    // Without moving the clock: the back-off ends on the signal, and its timer is gone.
    expect(await b.outbox.done).toBe("gave-up");
    expect(r.clock.pendingTimers).toBe(0);
    expect(posts(h, b.jobId).map((p) => p[1])).toEqual([503]);
    // The update in back-off and the result behind it are each logged as given up; neither is posted.
    expect(r.sink.lines.filter((l) => l["code"] === "RUNLET_REPORT_GAVE_UP").map((l) => l["msg"])).toEqual([
      "gave up posting progress update 1: the worker is exiting",
      "gave up posting the final result: the worker is exiting",
    ]);
    // The outbox leaves nothing on the worker's long-lived give-up signal.
    expect(getEventListeners(b.giveUp.signal, "abort")).toEqual([]);
    await r.close();
  });

  it("posts nothing when the give-up signal fired before the first post", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    b.giveUp.abort();
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"x"}', false);
    expect(await b.outbox.done).toBe("gave-up");
    // A later job's post reaches the harness, so this one's absence is not a matter of timing.
    const later = await box(r);
    later.outbox.final(r.config.urls.done(later.jobId, false), '{"output":"y"}', false);
    expect(await later.outbox.done).toBe("delivered");
    expect(posts(h, b.jobId)).toEqual([]);
    await r.close();
  });

  it("drops what is queued on discard (job-stop), ends a post's back-off and frees stream waiters", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const b = await box(r);
    h.injectFault("job-stream", { status: 503 }, 1);
    b.outbox.chunks(r.config.urls.stream(b.jobId)!, [chunk("a"), chunk("b")]);
    const waiting = b.outbox.waitBelow(0);
    await b.retry(1);
    b.outbox.discard();
    await waiting;
    expect(await b.outbox.done).toBe("discarded");
    expect(r.clock.pendingTimers).toBe(0);
    expect(b.outbox.unpostedStreamBytes).toBe(0);
    // Queued after the discard: ignored.
    b.outbox.final(r.config.urls.done(b.jobId, false), '{"output":"late"}', false);
    expect(posts(h, b.jobId).map((p) => p[1])).toEqual([503]);
    expect(getEventListeners(b.giveUp.signal, "abort")).toEqual([]);
    await r.close();
  });
});
