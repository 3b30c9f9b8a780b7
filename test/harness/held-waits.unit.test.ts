import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { TimerSet } from "../../src/harness/clock.js";
import { WorkerRegistry } from "../../src/harness/fleet/worker-registry.js";
import { EndpointQueue } from "../../src/harness/jobs/endpoint-queue.js";
import { JobEntry } from "../../src/harness/jobs/job-entry.js";
import { JobWaits, untilTerminal } from "../../src/harness/jobs/job-waits.js";

/**
 * The harness's held requests (waits on a job, job-take polls, job-stop polls) all wait on one
 * keyed waiter timed by a clock: here a ManualClock stands in for the real hold clock, so the
 * tests step time instead of sleeping, and prove that ended waits leave nothing behind.
 */

const job = (id: string) => new JobEntry(id, "ep", "run", { input: {} }, 0, 60_000);

describe("waits on a job", () => {
  it("ends with the job when it ends, as it is when the time runs out, and leaves no wait behind", async () => {
    const clock = new ManualClock();
    const jobs = new Map<string, JobEntry>();
    const waits = new JobWaits((id) => jobs.get(id), clock);
    const held: Promise<unknown>[] = [];
    for (let i = 0; i < 5_000; i++) {
      jobs.set(`j${i}`, job(`j${i}`));
      held.push(waits.untilEnded(`j${i}`, 30_000 + i));
    }
    expect(waits.pending).toBe(5_000);
    const ended = jobs.get("j7")!;
    ended.finish({ status: "CANCELLED" }, 0);
    waits.notify("j7");
    clock.advance(29_000);
    expect(await held[7]).toBe(ended);
    expect(waits.pending).toBe(4_999);
    clock.advance(10_000);
    const all = (await Promise.all(held)) as JobEntry[];
    expect(all.filter((j) => j.isLive())).toHaveLength(4_999);
    expect([waits.pending, clock.pendingTimers]).toEqual([0, 0]);
  });

  it("gives waitForJob's errors codes: unknown, deleted, still going", async () => {
    const clock = new ManualClock();
    const jobs = new Map<string, JobEntry>([
      ["queued", job("queued")],
      ["gone", job("gone")],
    ]);
    const waits = new JobWaits((id) => jobs.get(id), clock);
    await expect(untilTerminal(waits, "nope", 1_000)).rejects.toMatchObject({
      code: "RUNLET_HARNESS_NO_JOB",
      message: 'waitForJob: no job "nope"',
    });
    const late = untilTerminal(waits, "queued", 1_000);
    clock.advance(1_000);
    await expect(late).rejects.toMatchObject({
      code: "RUNLET_HARNESS_WAIT_TIMEOUT",
      message: 'waitForJob: job "queued" is still IN_QUEUE after 1000 ms',
      details: { jobId: "queued", status: "IN_QUEUE", timeoutMs: 1_000 },
    });
    const deleted = untilTerminal(waits, "gone", 1_000);
    jobs.get("gone")!.delete();
    waits.notify("gone");
    await expect(deleted).rejects.toMatchObject({ code: "RUNLET_HARNESS_JOB_DELETED" });
    expect(waits.pending).toBe(0);
  });
});

describe("held job-take polls", () => {
  it("hands a job to the oldest pending poll and drops polls that timed out or hung up", async () => {
    const clock = new ManualClock();
    const queue = new EndpointQueue<string>(
      { executionTimeoutMs: 1_000 },
      (ids, workerId) => ids.map((id) => `${id}@${workerId}`),
      clock,
    );
    const hungUp = new AbortController();
    const gone = queue.take("w0", 1, 60_000, hungUp.signal);
    const timedOut = queue.take("w1", 1, 10, new AbortController().signal);
    const waiting = queue.take("w2", 1, 60_000, new AbortController().signal);
    expect(queue.waitingTakes).toBe(3);
    hungUp.abort();
    clock.advance(10);
    // Both ended polls are still in the queue's list until their takes resume: the job skips them.
    queue.push("job-1");
    expect(await Promise.all([gone, timedOut, waiting])).toEqual([[], [], ["job-1@w2"]]);
    expect([queue.waitingTakes, clock.pendingTimers]).toEqual([0, 0]);
  });

  it("keeps nothing of thousands of polls that timed out", async () => {
    const clock = new ManualClock();
    const queue = new EndpointQueue<string>({ executionTimeoutMs: 1_000 }, (ids) => [...ids], clock);
    const signal = new AbortController().signal;
    for (let round = 0; round < 20; round++) {
      const polls = Array.from({ length: 500 }, (_, i) => queue.take(`w${i}`, 1, 30_000, signal));
      clock.advance(30_000);
      expect(await Promise.all(polls)).toEqual(polls.map(() => []));
      expect([queue.waitingTakes, clock.pendingTimers]).toEqual([0, 0]);
    }
    queue.push("late");
    expect(queue.ids).toEqual(["late"]);
  });
});

describe("held job-stop polls", () => {
  it("answers with the stop, or nothing after the hold, and keeps no wait", async () => {
    const clock = new ManualClock();
    const workers = new WorkerRegistry({
      timers: new TimerSet(clock),
      holdClock: clock,
      now: () => clock.now(),
      heartbeatTimeoutMs: 10 * 86_400_000,
      onLapse: () => {},
      onJobsLost: () => {},
    });
    const worker = workers.seen("ep", "w1");
    const signal = new AbortController().signal;
    for (let i = 0; i < 2_000; i++) {
      const poll = workers.stopPoll(worker, 30_000, signal);
      clock.advance(30_000);
      expect(await poll).toEqual([]);
    }
    // Two polls held at once (a restarted process under the same id) are both answered.
    const first = workers.stopPoll(worker, 30_000, signal);
    const second = workers.stopPoll(worker, 30_000, signal);
    workers.handOut("ep", "w1", "job-1");
    workers.requestStop("ep", "w1", "job-1");
    expect(await first).toEqual(["job-1"]);
    expect(await second).toEqual([]);
    expect(workers.heldStopPolls).toBe(0);
    workers.clear();
    expect(clock.pendingTimers).toBe(0);
  });
});
