import { describe, expect, it } from "vitest";
import { JobEntry } from "../../src/harness/jobs/job-entry.js";

const newJob = (input: unknown = { a: 1 }) =>
  new JobEntry("j1", "ep", "run", { input, bytes: 10 }, 1_000, 60_000);

describe("a harness job's lifecycle", () => {
  it("moves queue → running → ended and answers its questions from its state", () => {
    const job = newJob();
    expect([job.state, job.isLive(), job.canRetry()]).toEqual(["IN_QUEUE", true, false]);
    job.start("w1", 1_500);
    expect([job.state, job.workerId, job.startedAt, job.isRunningOn("w1"), job.isRunningOn("w2")]).toEqual([
      "IN_PROGRESS",
      "w1",
      1_500,
      true,
      false,
    ]);
    expect([job.isStrayFrom("w1"), job.isStrayFrom("w2")]).toEqual([false, true]);
    job.finish({ status: "FAILED", error: "boom" }, 2_000);
    expect([job.state, job.isLive(), job.isEnded(), job.canRetry(), job.error]).toEqual([
      "FAILED",
      false,
      true,
      true,
      "boom",
    ]);
    expect(job.isStrayFrom("w2")).toBe(false);
  });

  it("refuses a move its table does not allow, with RUNLET_HARNESS_JOB_STATE", () => {
    const job = newJob();
    job.start("w1", 1_000);
    job.finish({ status: "COMPLETED", output: 1, hasOutput: true }, 1_100);
    expect(() => job.retry()).toThrow(
      expect.objectContaining({
        code: "RUNLET_HARNESS_JOB_STATE",
        message: 'job "j1" is COMPLETED: only FAILED or TIMED_OUT jobs can be retried',
      }),
    );
    expect(() => job.start("w2", 1_200)).toThrow(
      expect.objectContaining({ code: "RUNLET_HARNESS_JOB_STATE" }),
    );
    expect(() => job.finish({ status: "CANCELLED" }, 1_200)).toThrow(
      expect.objectContaining({ message: 'job "j1" cannot go from COMPLETED to CANCELLED (a harness bug)' }),
    );
    expect(job.status).toBe("COMPLETED");
  });

  it("keeps progress but drops the attempt's stream and read positions when its attempt is lost", () => {
    const job = newJob();
    job.start("w1", 1_000);
    expect(job.addProgress({ p: 1 }, 5)).toBe(true);
    expect(job.addChunk({ output: "a" }, 5)).toBe(true);
    job.markRead("key", 1);
    expect(job.countLoss()).toBe(1);
    job.requeue();
    expect([
      job.state,
      job.workerId,
      job.startedAt,
      job.progress,
      job.stream,
      job.readPosition("key"),
    ]).toEqual(["IN_QUEUE", undefined, undefined, [{ p: 1 }], [], 0]);
    expect(job.lapses).toBe(1);
  });

  it("forgets the earlier run on a client retry", () => {
    const job = newJob();
    job.start("w1", 1_000);
    job.addProgress({ p: 1 }, 5);
    job.countLoss();
    job.noteResult({ stopPod: true, isStream: true, bytes: 3 });
    job.finish({ status: "TIMED_OUT", error: "late" }, 2_000);
    job.retry();
    expect([
      job.state,
      job.progress,
      job.lapses,
      job.stopPod,
      job.isStream,
      job.error,
      job.finishedAt,
    ]).toEqual(["IN_QUEUE", [], 0, false, undefined, undefined, undefined]);
  });

  it("becomes a tombstone that keeps its status and counters, never its data, and counts late posts", () => {
    const job = newJob({ big: "x".repeat(100) });
    job.start("w1", 1_000);
    job.addChunk({ output: "a" }, 5);
    job.finish({ status: "FAILED", error: "e".repeat(5_000) }, 1_100);
    expect(job.delete()).toBe(true);
    expect(job.delete()).toBe(false);
    expect([
      job.state,
      job.status,
      job.deleted,
      job.input,
      job.stream,
      job.bytes,
      job.canRetry(),
      job.isLive(),
    ]).toEqual(["DELETED", "FAILED", true, undefined, [], 0, false, false]);
    expect(job.error).toBe(`${"e".repeat(1_024)}… (cut: the job was deleted)`);
    expect(job.addProgress({}, 1)).toBe(false);
    expect(job.addChunk({ output: "b" }, 1)).toBe(false);
    expect(job.latePosts).toBe(2);
    expect(job.isStrayFrom("w9")).toBe(false);
  });

  it("deletes a queued or running job as well (ttl covers queue and run time)", () => {
    const queued = newJob();
    expect(queued.delete()).toBe(true);
    expect(queued.status).toBe("IN_QUEUE");
    const running = newJob();
    running.start("w1", 1_000);
    running.delete();
    expect([running.status, running.deleted, running.isRunningOn("w1")]).toEqual([
      "IN_PROGRESS",
      true,
      false,
    ]);
  });
});
