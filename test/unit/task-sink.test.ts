import { PassThrough, Readable, Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { BackgroundTasks } from "../../src/task-sink.js";
import { capture } from "./log-capture.js";

function captureLogs() {
  const c = capture();
  return { log: c.log, lines: () => (c.text() === "" ? [] : (c.lines() as Record<string, unknown>[])) };
}

describe("BackgroundTasks: the one sink of the worker's background work", () => {
  it("logs a failed task once with its name and code, and never rejects", async () => {
    const { log, lines } = captureLogs();
    const tasks = new BackgroundTasks({ log });
    await tasks.run("cache sync", () => Promise.reject(new Error("EROFS: read-only file system")));
    await tasks.run("cache sync", () => {
      throw new Error("EROFS again");
    });
    const failed = lines().filter((l) => l["code"] === "RUNLET_TASK_FAILED");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ task: "cache sync", failures: 1 });
    expect(String(failed[0]?.["message"])).toContain(
      "cache sync failed: Error: EROFS: read-only file system",
    );
    expect(tasks.failures("cache sync")).toBe(2);
    expect(tasks.running).toBe(0);
  });

  it("reports a task marked unfit to the lifecycle instead of logging it", async () => {
    const { log } = captureLogs();
    const unfit: string[] = [];
    const tasks = new BackgroundTasks({ log, unfit: (check, reason) => unfit.push(`${check}: ${reason}`) });
    tasks.fail("cache hydrate", new Error("ENOSPC"), { unfit: "cache" });
    expect(unfit).toEqual(["cache: cache hydrate failed: Error: ENOSPC"]);
  });

  it("pipes through stream.pipeline: a destination's error reaches the sink, the source is destroyed", async () => {
    const { log, lines } = captureLogs();
    const tasks = new BackgroundTasks({ log });
    const source = new PassThrough();
    const sink = new Writable({
      write(_chunk, _enc, done) {
        done(Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" }));
      },
    });
    const piped = tasks.pipe("cache sync", [source, sink]);
    source.write("x");
    expect(await piped).toBe(false);
    expect(source.destroyed).toBe(true);
    expect(lines().some((l) => String(l["message"]).includes("ENOSPC"))).toBe(true);
    expect(await tasks.pipe("copy", [Readable.from(["a", "b"]), new PassThrough().resume()])).toBe(true);
  });

  it("bounds the lines of a task that keeps failing: the first, then one a thousand, each with the count", () => {
    const { log, lines } = captureLogs();
    const tasks = new BackgroundTasks({ log });
    for (let i = 0; i < 2_500; i += 1) tasks.fail("log write", new Error("EPIPE"));
    const failed = lines().filter((l) => l["code"] === "RUNLET_TASK_FAILED");
    expect(failed.map((l) => l["failures"])).toEqual([1, 1_000, 2_000]);
    expect(tasks.failures("log write")).toBe(2_500);
  });
});
