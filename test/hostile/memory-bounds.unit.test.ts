import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { api, postChunk, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness } from "../support/inject.js";

const KiB = 1_024;
const MiB = 1_048_576;

describe("memory bounded in bytes, deleted jobs as tombstones (issue 22, items 2 and 4)", () => {
  it("keeps the request log under maxRecordedRequestBytes, dropping the oldest records", async () => {
    await using h = inMemoryHarness({ maxRecordedRequestBytes: MiB, takeTimeoutMs: 200 });
    const body = { output: "x".repeat(200 * KiB) };
    for (let i = 0; i < 12; i++) expect(await postDone(h, `missing-${i}`, body)).toBe(404);
    const { requestLogBytes, requestLogRecords } = h.memory();
    expect(requestLogBytes).toBeLessThanOrEqual(MiB);
    expect(requestLogRecords).toBeLessThan(12);
    const paths = h.requests().map((r) => r.path);
    expect(paths.at(-1)).toBe("/v2/local/job-done/w1/missing-11");
    expect(paths).not.toContain("/v2/local/job-done/w1/missing-0");
  });

  it("keeps ended jobs under maxFinishedJobBytes, deleting the oldest to a tombstone", async () => {
    await using h = inMemoryHarness({ maxFinishedJobBytes: MiB, takeTimeoutMs: 200 });
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const id = h.enqueue("local", { input: {} });
      await takeJob(h);
      expect(await postDone(h, id, { output: "y".repeat(300 * KiB) })).toBe(200);
      ids.push(id);
    }
    const memory = h.memory();
    expect(memory.finishedBytes).toBeLessThanOrEqual(MiB);
    expect(memory.finishedJobs).toBe(3);
    expect(h.job(ids[0]!)).toMatchObject({ status: "COMPLETED", deleted: true, progress: [], stream: [] });
    expect(h.job(ids[0]!)?.output).toBeUndefined();
    expect((await api(h, "GET", `/v2/local/status/${ids[0]}`)).status).toBe(404);
    expect((await api(h, "GET", `/v2/local/status/${ids[7]}`)).body).toMatchObject({ status: "COMPLETED" });
  });

  it("keeps only id, status and times of the jobs removeEndpoint deletes, not their streams", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: { text: "z".repeat(100 * KiB) } });
    await takeJob(h);
    for (let i = 0; i < 3; i++) expect(await postChunk(h, id, { output: "s".repeat(500 * KiB) })).toBe(200);
    expect(h.memory().tombstones).toBe(0);
    await h.removeEndpoint("local");
    const gone = h.job(id)!;
    expect(gone).toMatchObject({ id, status: "IN_PROGRESS", deleted: true, progress: [], stream: [] });
    expect(gone.input).toBeUndefined();
    expect(h.memory().tombstones).toBe(1);
  });

  it("drops the input of a purged job and of one whose ttl ran out, and forgets both after an hour", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200 });
    const purged = h.enqueue("local", { input: { big: "p".repeat(100 * KiB) } });
    expect((await api(h, "POST", "/v2/local/purge-queue")).body).toEqual({ removed: 1, status: "completed" });
    const expired = h.enqueue("local", { input: { big: "t".repeat(100 * KiB) }, policy: { ttl: 10_000 } });
    clock.advance(10_000);
    for (const id of [purged, expired]) {
      expect(h.job(id)).toMatchObject({ deleted: true, status: "IN_QUEUE" });
      expect(h.job(id)?.input).toBeUndefined();
    }
    expect(h.memory().tombstones).toBe(2);
    clock.advance(60 * 60_000);
    expect(h.job(purged)).toBeUndefined();
    expect(h.job(expired)).toBeUndefined();
    expect(h.memory().tombstones).toBe(0);
  });

  it("drops the output of a job whose result retention ran out", async () => {
    const clock = new ManualClock();
    await using h = inMemoryHarness({ clock, takeTimeoutMs: 200, limits: { runRetentionMs: 1_000 } });
    const id = h.enqueue("local", { input: {} });
    await takeJob(h);
    await postDone(h, id, { output: "r".repeat(100 * KiB) });
    expect(h.memory()).toMatchObject({ finishedJobs: 1 });
    clock.advance(1_000);
    expect(h.job(id)).toMatchObject({ status: "COMPLETED", deleted: true });
    expect(h.job(id)?.output).toBeUndefined();
    expect(h.memory()).toMatchObject({ finishedJobs: 0, finishedBytes: 0, tombstones: 1 });
    // A late result for the deleted job is still recognised and counted.
    expect(await postDone(h, id, { output: "late" })).toBe(200);
    expect(h.job(id)?.duplicateResults).toBe(1);
  });

  it("keeps only the first KiB of a deleted failed job's error text", async () => {
    await using h = inMemoryHarness({ maxFinishedJobBytes: MiB, takeTimeoutMs: 200 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = h.enqueue("local", { input: {} });
      await takeJob(h);
      expect(await postDone(h, id, { error: "e".repeat(2 * MiB) })).toBe(200);
      ids.push(id);
    }
    // Each failure is over the bound alone, so every older one became a tombstone.
    const gone = h.job(ids[0]!)!;
    expect(gone).toMatchObject({ status: "FAILED", deleted: true });
    expect(gone.error?.startsWith("eeee")).toBe(true);
    expect(gone.error?.length).toBeLessThan(2 * KiB);
    expect(h.job(ids[2]!)?.error?.length).toBe(2 * MiB);
  });
});
