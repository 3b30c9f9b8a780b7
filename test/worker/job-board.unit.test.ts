import { describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { EARLY_STOPS_KEPT, JobBoard } from "../../src/worker/job/job-board.js";
import { gate, memoryHarness, waitFor } from "../support/workers.js";
import { jobParts, partsRig } from "./job-rig.js";

/**
 * The job board (job-board.ts) through its public methods: jobs taken from the harness in memory
 * (the subject is the board, not the socket), run by the in-process runner, their results read back
 * from the harness. Waits are on a ManualClock that the tests never move unless they say so, so a
 * wait that ends before a clock step was ended by a wake (or the closing signal), not by time.
 */

/** A handler that holds each job until the test opens its gate, and counts the jobs it ran. */
function heldHandler() {
  const gates = new Map<string, ReturnType<typeof gate>>();
  const started: string[] = [];
  const definition = defineHandler({
    concurrency: 4,
    handler: async ({ job }) => {
      started.push(job.id);
      const g = gate();
      gates.set(job.id, g);
      await g.promise;
      return { ran: job.id };
    },
  });
  return {
    definition,
    started,
    release: (id: string) =>
      waitFor(`job ${id} to start`, () => gates.get(id))!.then((g) => g.open(undefined)),
  };
}

/** A wait that says whether it has ended. */
function watched(wait: Promise<void>) {
  const w = {
    ended: false,
    done: wait.then(() => {
      w.ended = true;
    }),
  };
  return w;
}

describe("JobBoard", () => {
  it("starts at most `free` of the delivered jobs and fails the rest unrun, asking for a retry", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const held = heldHandler();
    const { parts } = jobParts(r, held.definition);
    const closing = new AbortController();
    const board = new JobBoard(parts, closing.signal);
    const [a, b, c] = await r.take(3);
    board.admit([a!, b!, c!], [], 1);
    expect([board.size, board.ids()]).toEqual([1, [a!.id]]);
    expect(board.jobs().map((job) => job.id)).toEqual([a!.id]);
    expect(board.unrunReports()).toHaveLength(2);
    await Promise.all(board.unrunReports());
    const reason =
      "the platform delivered more jobs than the 1 this worker asked for; this job was not run (retry it)";
    for (const extra of [b!, c!]) expect((await h.waitForJob(extra.id)).error).toBe(reason);
    expect(board.unrunReports()).toEqual([]);
    expect(held.started).toEqual([a!.id]);
    await held.release(a!.id);
    expect((await h.waitForJob(a!.id)).output).toEqual({ ran: a!.id });
    await waitFor("the board to let the job go", () => board.size === 0);
    await r.close();
  });

  it("ignores a second copy of a job it holds, well-formed or malformed, and posts one result for it", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const held = heldHandler();
    const { parts } = jobParts(r, held.definition);
    const board = new JobBoard(parts, new AbortController().signal);
    const [a] = await r.take();
    board.admit([a!], [], 2);
    board.admit([a!], [{ id: a!.id, reason: "input: expected object" }], 2);
    expect([board.size, board.unrunReports().length]).toEqual([1, 0]);
    await held.release(a!.id);
    expect((await h.waitForJob(a!.id)).output).toEqual({ ran: a!.id });
    await waitFor("the board to let the job go", () => board.size === 0);
    expect(held.started).toEqual([a!.id]);
    expect(h.requests({ route: "job-done" }).map((q) => q.body)).toEqual([
      JSON.stringify({ output: { ran: a!.id } }),
    ]);
    const copies = r.sink.lines.filter((l) => l["code"] === "RUNLET_PROTOCOL_BAD_JOB").map((l) => l["msg"]);
    expect(copies).toEqual([
      "the platform delivered a malformed copy of a job this worker is already running; ignoring the copy (input: expected object)",
      "the platform delivered a job this worker is already running; ignoring the copy",
    ]);
    await r.close();
  });

  it("fails a malformed job with its reason, and refuses a job whose id a result URL cannot carry", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const held = heldHandler();
    const { parts } = jobParts(r, held.definition);
    const board = new JobBoard(parts, new AbortController().signal);
    const [bad] = await r.take();
    board.admit(
      [{ id: "..", input: {} }],
      [
        { id: bad!.id, reason: "input: Required" },
        { id: undefined, reason: "no id" },
      ],
      4,
    );
    expect(board.size).toBe(0);
    // Only the malformed job with an id is reported: neither the id-less one nor ".." can be addressed.
    expect(board.unrunReports()).toHaveLength(1);
    await Promise.all(board.unrunReports());
    expect((await h.waitForJob(bad!.id)).error).toBe("input: Required");
    expect(h.requests({ route: "job-done" }).map((q) => q.path)).toEqual([
      expect.stringContaining(encodeURIComponent(bad!.id)),
    ]);
    expect(held.started).toEqual([]);
    expect(
      r.sink.lines.some((l) => l["jobId"] === ".." && String(l["msg"]).includes("a result URL cannot carry")),
    ).toBe(true);
    await r.close();
  });

  it("does not run a job whose job-stop came before its take answer, and keeps such stops bounded", async () => {
    // The job-stop answer and the take answer come on two connections; the bench's soak of only
    // cancelled jobs saw the stop read first, the stop dropped, and every slot held for good by
    // handlers waiting for an abort that never came (the worker took nothing more).
    await using h = memoryHarness();
    const r = partsRig(h);
    const held = heldHandler();
    const { parts } = jobParts(r, held.definition);
    const board = new JobBoard(parts, new AbortController().signal);
    const [a, b] = await r.take(2);
    board.stop(a!.id);
    // Past the bound, the oldest kept stop is forgotten: b's was the first of these.
    board.stop(b!.id);
    for (let i = 0; i < EARLY_STOPS_KEPT; i++) board.stop(`ended-job-${i}`);
    board.stop(a!.id); // named again: kept as the newest
    board.admit([a!, b!], [], 2);
    expect(board.ids()).toEqual([b!.id]);
    expect(board.unrunReports()).toEqual([]);
    await held.release(b!.id);
    expect((await h.waitForJob(b!.id)).output).toEqual({ ran: b!.id });
    await waitFor("the board to let the job go", () => board.size === 0);
    expect(held.started).toEqual([b!.id]);
    // The stopped job posted nothing.
    expect(h.requests({ route: "job-done" }).map((q) => q.path)).toEqual([
      expect.stringContaining(encodeURIComponent(b!.id)),
    ]);
    expect(
      r.sink.lines.some(
        (l) =>
          l["jobId"] === a!.id && l["msg"] === "job-stop named this job before it arrived; not running it",
      ),
    ).toBe(true);
    await r.close();
  });

  it("wakes its waiters when a job starts, is stopped and leaves; times out on the clock; ends on closing", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const held = heldHandler();
    const { parts } = jobParts(r, held.definition);
    const closing = new AbortController();
    const board = new JobBoard(parts, closing.signal);
    const [a, b] = await r.take(2);

    const onStart = watched(board.waitForChange(60_000));
    expect(onStart.ended).toBe(false);
    board.admit([a!, b!], [], 2);
    await onStart.done;

    // job-stop: the job is aborted and posts nothing, but holds its slot until its handler ends.
    const onStop = watched(board.waitForChange(60_000));
    board.stop(a!.id);
    await onStop.done;
    expect(board.jobs().find((job) => job.id === a!.id)?.stopRequested).toBe(true);
    expect(board.size).toBe(2);

    const onLeave = watched(board.waitForChange(60_000));
    await held.release(a!.id);
    await onLeave.done;
    expect(board.ids()).toEqual([b!.id]);

    // Nothing changes: the wait ends when the clock reaches its timeout, not before.
    const onTime = watched(board.waitForChange(1_000));
    r.clock.advance(999);
    const pending = watched(board.waitForChange(60_000));
    board.stop("no-such-job"); // an unknown id changes nothing and wakes no one
    r.clock.advance(1);
    await onTime.done;
    expect(pending.ended).toBe(false);

    closing.abort();
    await pending.done;
    await board.waitForChange(60_000); // already closed: ends at once

    await held.release(b!.id);
    expect((await h.waitForJob(b!.id)).output).toEqual({ ran: b!.id });
    await waitFor("the board to let the job go", () => board.size === 0);
    // The stopped job posted nothing; the other one its result.
    expect(h.requests({ route: "job-done" }).map((q) => q.path)).toEqual([
      expect.stringContaining(encodeURIComponent(b!.id)),
    ]);
    await r.close();
  });

  it("consults a concurrency function between takes and keeps the value when it answers badly", async () => {
    await using h = memoryHarness();
    const r = partsRig(h);
    const answers: unknown[] = [3, 0, 5];
    const seen: number[] = [];
    const definition = defineHandler({
      concurrency: (current: number) => {
        seen.push(current);
        return answers.shift() as number;
      },
      handler: () => "ok",
    });
    const { parts } = jobParts(r, definition);
    const board = new JobBoard(parts, new AbortController().signal);
    expect(board.concurrency).toBe(1);
    expect(board.consultConcurrency()).toBe(3);
    expect(board.consultConcurrency()).toBe(3); // 0 is refused and logged
    expect(board.consultConcurrency()).toBe(5);
    expect(seen).toEqual([1, 3, 3]);
    expect(board.concurrency).toBe(5);
    expect(r.sink.lines.map((l) => l["msg"])).toContain(
      "concurrency function must return an integer ≥ 1, got 0; keeping 3",
    );
    await r.close();
  });
});
