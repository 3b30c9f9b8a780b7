import { describe, expect, it } from "vitest";
import { BackgroundTasks, settle } from "../../src/task-sink.js";
import { capture } from "../support/log-capture.js";

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
    await tasks.run("cache hydrate", () => Promise.reject(new Error("ENOSPC")), { unfit: "cache" });
    expect(unfit).toEqual(["cache: cache hydrate failed: Error: ENOSPC"]);
  });

  it("settle() hands a rejection to its owner, and nothing reaches the process, not even the owner's own throw", async () => {
    const heard: unknown[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown): void => {
      unhandled.push(err);
    };
    process.on("unhandledRejection", onUnhandled);
    try {
      expect(settle(Promise.reject(new Error("lost")), (err) => heard.push(err))).toBeUndefined();
      settle(Promise.reject(new Error("twice")), () => {
        throw new Error("the owner failed too");
      });
      settle(Promise.resolve(1), (err) => heard.push(err));
      // Two turns: a rejection nobody handled is reported after the microtasks of one.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(heard.map((e) => (e as Error).message)).toEqual(["lost"]);
    expect(unhandled).toEqual([]);
  });

  it("bounds the lines of a task that keeps failing: the first, then one a thousand, each with the count", async () => {
    const { log, lines } = captureLogs();
    const tasks = new BackgroundTasks({ log });
    const failing = Array.from({ length: 2_500 }, () =>
      tasks.run("log write", () => Promise.reject(new Error("EPIPE"))),
    );
    await Promise.all(failing);
    const failed = lines().filter((l) => l["code"] === "RUNLET_TASK_FAILED");
    expect(failed.map((l) => l["failures"])).toEqual([1, 1_000, 2_000]);
    expect(tasks.failures("log write")).toBe(2_500);
  });
});
