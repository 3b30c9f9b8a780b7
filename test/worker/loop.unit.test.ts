import { fileURLToPath } from "node:url";
import { BroadcastChannel } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { HandlerDefinition } from "../../src/handler/index.js";
import { type Harness, ManualClock } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { logSink, memoryHarness, waitFor, workerFor } from "../support/workers.js";

const threadBytesHandler = fileURLToPath(new URL("./thread-bytes-handler.ts", import.meta.url));

// The worker loop end to end against the harness over real HTTP: a concurrency function,
// back-pressure on a stream, and the in-process hard stop of a handler that ignores a job-stop.

/** Handlers that wait until the test lets them finish. */
function gates() {
  const open = new Map<string, () => void>();
  return {
    wait(id: string): Promise<void> {
      return new Promise((resolve) => open.set(id, resolve));
    },
    release(): void {
      for (const resolve of open.values()) resolve();
      open.clear();
    },
  };
}

describe("the worker loop", () => {
  it("takes as many jobs as the concurrency function says between takes, and logs and ignores a bad return", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    const gate = gates();
    let target: unknown = 1;
    // While every slot is busy the worker rechecks the concurrency function each second of its
    // clock: each poll of a wait below moves the clock a second instead of sleeping one.
    const clock = new ManualClock();
    const tick = <T>(value: T): T => {
      clock.advance(1_000);
      return value;
    };
    const w = await workerFor(
      h,
      defineHandler({
        input: z.number(),
        concurrency: () => {
          if (target === "throw") throw new Error("scheduler offline");
          return target as number;
        },
        handler: async ({ job }) => {
          await gate.wait(job.id);
          return "ok";
        },
      }),
      { sink, clock },
    );
    try {
      const first = [1, 2, 3, 4].map((n) => h.enqueue("local", { input: n }));
      const running = () => first.filter((id) => h.job(id)?.status === "IN_PROGRESS").length;
      await waitFor("one job to run", () => running() === 1);
      expect(w.concurrency).toBe(1);
      expect(h.requests({ route: "job-take-batch" })).toEqual([]);

      // Raised while the one slot is busy: the next take asks for the two new slots at once.
      target = 3;
      await waitFor("three jobs to run", () => tick(running() === 3));
      const batch = h.requests({ route: "job-take-batch" })[0]!;
      expect(batch.query).toMatchObject({ batch_size: "2", job_in_progress: "1" });
      expect(w.concurrency).toBe(3);

      // Bad returns are logged and ignored; the worker keeps 3 and goes on.
      for (const bad of [0, 2.5, "three", "throw"]) {
        target = bad;
        await waitFor(`the bad return ${String(bad)} to be logged`, () =>
          tick(
            sink.lines.some((l) =>
              bad === "throw"
                ? l["message"] === "the concurrency function threw; keeping the current value"
                : l["message"] ===
                  `concurrency function must return an integer ≥ 1, got ${String(bad)}; keeping 3`,
            ),
          ),
        );
        expect(w.concurrency).toBe(3);
      }

      // Lowered while three run: takes effect at once, without waiting for them to finish.
      target = 1;
      await waitFor("concurrency to drop to 1", () => tick(w.concurrency === 1));
      expect(running()).toBe(3);
      gate.release();
      const rest = [5, 6].map((n) => h.enqueue("local", { input: n }));
      for (const id of [...first, ...rest]) {
        const job = await waitForRelease(h, id, gate);
        expect(job.status).toBe("COMPLETED");
      }
      // With concurrency 1, every take after the drop asks for one job.
      const takesAfter = h.requests().filter((r) => r.route === "job-take" || r.route === "job-take-batch");
      expect(takesAfter.at(-1)!.route).toBe("job-take");
    } finally {
      gate.release();
      await w.close();
    }
  });

  it("pauses a generator once its unposted chunks exceed maxBufferedStreamBytes and still delivers every item in order", async () => {
    await using h = memoryHarness();
    const budget = 1_000;
    const items = Array.from({ length: 60 }, (_, i) => `${String(i).padStart(3, "0")}${"x".repeat(97)}`);
    const chunkBytes = Buffer.byteLength(
      JSON.stringify({
        output: items[0],
        metrics: { streamIndex: 10, part: 0, parts: 1, encoding: "json", bytes: 102 },
      }),
    );
    // Every item counts against the budget until its post is answered: at most this many at once.
    const maxUnposted = Math.floor(budget / chunkBytes);
    const ahead: number[] = [];
    h.injectFault("job-stream", { delayMs: 25 }, items.length);
    await using _w = await workerFor(
      h,
      defineHandler({
        maxBufferedStreamBytes: budget,
        async *handler() {
          for (const [i, item] of items.entries()) {
            // Items handed to the worker so far, minus posts the platform has received.
            ahead.push(i - h.requests({ route: "job-stream" }).length);
            yield item;
          }
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id, { timeoutMs: 20_000 });
    expect(job.status).toBe("COMPLETED");
    expect(job.stream.map((c) => c.output)).toEqual(items);
    // It ran ahead of the network (generation does not wait for each post) ...
    expect(Math.max(...ahead)).toBeGreaterThanOrEqual(2);
    // ... but never further than the byte budget allows (without back-pressure it would reach 60).
    expect(Math.max(...ahead)).toBeLessThanOrEqual(maxUnposted);
    expect(h.requests({ route: "job-stream" }).map((r) => r.status)).toEqual(items.map(() => 200));
  });

  it("keeps the chunks of one 8 MB item that are made but not yet posted within maxBufferedStreamBytes", async () => {
    await using h = memoryHarness();
    const budget = 3 * 1_048_576;
    // Eleven chunks against a budget of three: room enough to see the lead bounded (the bench
    // streams 100 MB items, npm run bench, "stream").
    const size = 8_000_000;
    const answered = () => h.requests({ route: "job-stream" }).filter((r) => r.status === 200).length;
    // The splitter encodes each base64 slice from a view of the bytes' memory, reading `buffer`
    // once per slice: counting those reads counts the chunks made so far. At each one, note how
    // many chunks were made but not yet answered by the platform (the harness).
    const ahead: number[] = [];
    let made = 0;
    class CountingBytes extends Uint8Array {
      override get buffer(): ArrayBuffer {
        ahead.push(made - answered());
        made += 1;
        return super.buffer as ArrayBuffer;
      }
    }
    const data = new CountingBytes(size);
    for (let i = 0; i < size; i++) data[i] = (i * 7) & 0xff;
    h.injectFault("job-stream", { delayMs: 25 }, 1_000);
    await using _w = await workerFor(
      h,
      defineHandler({
        maxBufferedStreamBytes: budget,
        async *handler() {
          yield data;
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    const job = await h.waitForJob(id, { timeoutMs: 60_000 });
    expect(job.status).toBe("COMPLETED");
    const parts = job.stream.length;
    expect(parts).toBeGreaterThan(8);
    // Exactly one read per chunk, or the count above does not count chunks.
    expect(made).toBe(parts);
    const sizes = job.stream.map((c) => Buffer.byteLength(JSON.stringify(c)));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1_048_576);
    expect(job.stream.map((c) => (c.metrics as { part: number }).part)).toEqual([...Array(parts).keys()]);
    const joined = Buffer.concat(job.stream.map((c) => Buffer.from(c.output as string, "base64")));
    // Compared as bytes: a deep equality of megabytes walks every index as a key.
    expect(joined.equals(data)).toBe(true);
    // Every chunk counts against the budget until its post is answered: at most this many at once.
    const maxUnposted = Math.floor(budget / Math.max(...sizes.slice(0, -1)));
    expect(maxUnposted).toBe(3);
    // Chunks are made ahead of the network while posts are slow ...
    expect(Math.max(...ahead)).toBeGreaterThanOrEqual(2);
    // ... but never further than the budget allows (made all at once, the item would reach parts - 1).
    expect(Math.max(...ahead)).toBeLessThanOrEqual(maxUnposted);
  });

  it("keeps an 8 MB item's unposted chunks within the budget when an isolation thread makes them", async () => {
    await using h = memoryHarness();
    const size = 8_000_000;
    const answered = () => h.requests({ route: "job-stream" }).filter((r) => r.status === 200).length;
    // The thread reports each chunk it makes on a broadcast channel; noted here on arrival, a
    // moment after it was made (posts only advance meanwhile, so this never overstates the lead).
    const name = `runlet-loop-test-${process.pid}-${Date.now()}`;
    const channel = new BroadcastChannel(name);
    const ahead: number[] = [];
    channel.onmessage = (event: unknown) => {
      ahead.push((event as { data: number }).data - answered());
    };
    try {
      h.injectFault("job-stream", { delayMs: 25 }, 1_000);
      const definition = (await import(threadBytesHandler)).default as HandlerDefinition;
      await using _w = await workerFor(h, definition, { handlerModule: threadBytesHandler });
      const id = h.enqueue("local", { input: { bytes: size, channel: name } });
      const job = await h.waitForJob(id, { timeoutMs: 60_000 });
      expect(job.status).toBe("COMPLETED");
      const parts = job.stream.length;
      expect(parts).toBeGreaterThan(8);
      await waitFor("every chunk's report", () => ahead.length === parts);
      const sizes = job.stream.map((c) => Buffer.byteLength(JSON.stringify(c)));
      expect(Math.max(...sizes)).toBeLessThanOrEqual(1_048_576);
      const joined = Buffer.concat(job.stream.map((c) => Buffer.from(c.output as string, "base64")));
      expect(joined.length).toBe(size);
      expect(joined.every((b, i) => b === ((i * 7) & 0xff))).toBe(true);
      // The handler's budget is 3 MiB: three chunks of just under 1 MiB.
      expect(Math.floor((3 * 1_048_576) / Math.max(...sizes.slice(0, -1)))).toBe(3);
      // Made ahead of the slow posts, but never further than the budget (all at once: parts - 1).
      expect(Math.max(...ahead)).toBeGreaterThanOrEqual(2);
      expect(Math.max(...ahead)).toBeLessThanOrEqual(3);
    } finally {
      channel.close();
    }
  });

  it("hard-stops an in-process handler that ignores a job-stop: posts nothing for it and stops with exit code 1", async () => {
    await using h = memoryHarness();
    const sink = logSink();
    let stopped = false;
    let sawAbort = false;
    const w = await workerFor(
      h,
      defineHandler({
        hardStopGraceMs: 100,
        handler: async ({ signal }) => {
          signal.addEventListener("abort", () => {
            sawAbort = true;
          });
          while (!stopped) await new Promise((r) => setTimeout(r, 10));
          return "too late";
        },
      }),
      { sink },
    );
    try {
      const id = h.enqueue("local", { input: {} });
      await waitFor("the job to run", () => h.job(id)?.status === "IN_PROGRESS");
      h.stopJob(id);
      expect(await w.stopped).toEqual({ reason: "runaway", exitCode: 1 });
      expect(sawAbort).toBe(true);
      expect(h.requests({ route: "job-done" })).toEqual([]);
      expect(h.job(id)!.status).toBe("CANCELLED");
      expect(sink.lines.map((l) => l["message"])).toContain(
        "an in-process handler ignored its aborted signal (deadline or job-stop); the worker reports it and stops taking jobs",
      );
    } finally {
      stopped = true;
      await w.close();
    }
  });
});

/** Waits for a job, releasing gated handlers as they start (jobs taken after the release). */
async function waitForRelease(h: Harness, id: string, gate: ReturnType<typeof gates>) {
  return waitFor(`job ${id} to end, releasing gated handlers`, () => {
    const job = h.job(id);
    if (job !== undefined && ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"].includes(job.status))
      return job;
    gate.release();
    return undefined;
  });
}
