import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import type { ExecuteOutcome } from "../../src/handler/execute.js";
import { defineBatchHandler, defineHandler } from "../../src/index.js";
import type { DeliveredJob } from "../../src/protocol/index.js";
import { BatchScheduler } from "../../src/worker/job/batch-scheduler.js";
import { type Launch, PlainScheduler, type ScheduledJob } from "../../src/worker/job/scheduler.js";
import { InProcessRunner } from "../../src/worker/runner/runner.js";
import { gate, turn, waitFor } from "../support/workers.js";

/**
 * The two schedulers on their own, over the real in-process runner: `room` is a pure query (it
 * starts nothing and tells nobody), and a batch whose seat was missing starts on the explicit
 * `setConcurrency` call. The jobs are the smallest ScheduledJob (what ActiveJob is to a
 * scheduler): they record their launch and take their outcome from their place in the run.
 */

const log = pino({ level: "silent" });
const settings = {
  identity: { hostname: "test", workerId: "w" },
  bucket: undefined,
  s3: { allowPrivateAddresses: false, presignExpiresSec: 3600, tmpRoot: undefined },
};
const hooks = { progress: () => undefined, chunks: async () => undefined };
const job = (id: string): DeliveredJob => ({ id, input: {} }) as DeliveredJob;

/** A job as a scheduler sees it: `launched` gets its id at its launch; `outcome` is its place in its run. */
function scheduled(
  id: string,
  launched: string[],
): ScheduledJob & { readonly outcome: Promise<ExecuteOutcome | "killed"> } {
  let resolveLaunch!: (launch: Launch) => void;
  const launch = new Promise<Launch>((resolve) => {
    resolveLaunch = resolve;
  });
  return {
    id,
    runJob: { job: job(id), timeoutMs: 60_000, log, hooks, onLaunch: () => launched.push(id) },
    prepare: async () => true,
    launch: resolveLaunch,
    outcome: launch.then(({ run, index }) =>
      run.outcomes.then((outcomes) => (outcomes === "killed" ? "killed" : outcomes[index]!)),
    ),
  };
}

describe("PlainScheduler", () => {
  it("leaves the concurrency less the jobs held as room, and starts a job at once", async () => {
    const definition = defineHandler({ handler: () => "ok" });
    const scheduler = new PlainScheduler(new InProcessRunner(definition, settings, log, new ManualClock()));
    expect(scheduler.room(0)).toBe(1);
    scheduler.setConcurrency(3);
    expect(scheduler.room(1)).toBe(2);
    expect(scheduler.room(5)).toBe(0);
    const launched: string[] = [];
    const a = scheduled("a", launched);
    scheduler.admit(a);
    expect(launched).toEqual(["a"]);
    expect(await a.outcome).toMatchObject({ result: { kind: "output" } });
  });
});

describe("BatchScheduler", () => {
  it("answers room without starting a due batch; setConcurrency starts it when a seat frees", async () => {
    const release = gate();
    const definition = defineBatchHandler({
      batch: { maxSize: 1, maxWaitMs: 0 },
      handler: async ({ inputs }) => {
        await release.promise;
        return inputs.map(() => "ok");
      },
    });
    const clock = new ManualClock();
    let roomChanges = 0;
    const scheduler = new BatchScheduler({
      definition,
      runner: new InProcessRunner(definition, settings, log, clock),
      clock,
      log,
      runaway: () => undefined,
      roomChanged: () => {
        roomChanges += 1;
      },
    });
    const launched: string[] = [];
    const first = scheduled("a", launched);
    scheduler.admit(first);
    await waitFor("the first batch to start", () => launched.includes("a"));
    const second = scheduled("b", launched);
    scheduler.admit(second);
    // Full (maxSize 1) and due, but the one seat is taken: it waits, and holds the whole room.
    // Its input is validated first (a few turns), then it joins the filling batch.
    for (let i = 0; i < 3; i += 1) await turn();
    expect(scheduler.room(1)).toBe(0);
    const changes = roomChanges;
    for (let i = 0; i < 5; i += 1) expect(scheduler.room(2)).toBe(0);
    expect(launched).toEqual(["a"]);
    expect(roomChanges).toBe(changes);
    scheduler.setConcurrency(2);
    expect(launched).toEqual(["a", "b"]);
    expect(scheduler.room(2)).toBe(1);
    release.open();
    expect(await first.outcome).toMatchObject({ result: { kind: "output" } });
    expect(await second.outcome).toMatchObject({ result: { kind: "output" } });
  });
});
