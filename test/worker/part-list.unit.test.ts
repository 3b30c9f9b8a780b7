import { describe, expect, it } from "vitest";
import { WorkerEventHub } from "../../src/worker/events.js";
import { PartList, type WorkerPart } from "../../src/worker/lifecycle/part-list.js";
import { StartupPhases } from "../../src/worker/lifecycle/startup-phases.js";
import { capture } from "../support/log-capture.js";

/** A part that records its start, ready and stop in `trail`; `fail` makes its start answer false. */
function part(
  name: string,
  trail: string[],
  more: Partial<WorkerPart> & { fail?: boolean } = {},
): WorkerPart {
  return {
    name,
    ...(more.phase === undefined ? {} : { phase: more.phase }),
    start: () => {
      trail.push(`start ${name}`);
      return more.fail !== true;
    },
    ready: () => trail.push(`ready ${name}`),
    stop: (deadline) => {
      trail.push(`stop ${name} by ${deadline}`);
      if (name === "throws") throw new Error("stop failed");
    },
  };
}

function list(parts: (trail: string[]) => WorkerPart[]) {
  const trail: string[] = [];
  const { log, lines } = capture();
  const events = new WorkerEventHub(log);
  const seen: string[] = [];
  events.on("phase", ({ phase, state }) => seen.push(`${phase} ${state}`));
  events.on("ready", () => seen.push("ready"));
  const phases = new StartupPhases(
    events,
    log,
    () => 0,
    () => 0,
  );
  return { trail, seen, lines, parts: new PartList(parts(trail), phases, log) };
}

describe("PartList: start forward until ready, stop in reverse", () => {
  it("starts every part in order, reports each phase and ready from the list, then stops them last first", async () => {
    const { trail, seen, parts } = list((t) => [
      part("platform", t),
      part("fitness", t, { phase: "fitness" }),
      part("runner", t, { phase: "setup" }),
      part("take loop", t),
    ]);
    expect(parts.names).toEqual(["platform", "fitness", "runner", "take loop"]);
    expect(await parts.start(new AbortController().signal)).toBe(true);
    await parts.stop(42);
    expect(trail).toEqual([
      "start platform",
      "start fitness",
      "start runner",
      "start take loop",
      "ready platform",
      "ready fitness",
      "ready runner",
      "ready take loop",
      "stop take loop by 42",
      "stop runner by 42",
      "stop fitness by 42",
      "stop platform by 42",
    ]);
    expect(seen).toEqual(["fitness started", "fitness done", "setup started", "setup done", "ready"]);
  });

  it("starts nothing after a part that fails, reports no ready, and stops only the parts whose start began", async () => {
    const { trail, seen, parts } = list((t) => [
      part("platform", t),
      part("fitness", t, { phase: "fitness", fail: true }),
      part("runner", t, { phase: "setup" }),
    ]);
    expect(await parts.start(new AbortController().signal)).toBe(false);
    await parts.stop(7);
    expect(trail).toEqual(["start platform", "start fitness", "stop fitness by 7", "stop platform by 7"]);
    expect(seen).toEqual(["fitness started", "fitness failed"]);
  });

  it("starts nothing once its signal aborted, and goes on stopping past a part whose stop throws", async () => {
    const { trail, lines, parts } = list((t) => [part("platform", t), part("throws", t), part("runner", t)]);
    const closing = new AbortController();
    closing.abort();
    expect(await parts.start(closing.signal)).toBe(false);
    expect(trail).toEqual([]);
    const { parts: started, trail: t2, lines: l2 } = list((t) => [part("platform", t), part("throws", t)]);
    expect(await started.start(new AbortController().signal)).toBe(true);
    await started.stop(1);
    // Idempotent: a second stop is the first.
    await started.stop(2);
    expect(t2.filter((line) => line.startsWith("stop"))).toEqual(["stop throws by 1", "stop platform by 1"]);
    const warned = (l2() as Record<string, unknown>[]).filter((l) => l["part"] === "throws");
    expect(warned.map((l) => l["message"])).toEqual(["stopping the throws failed"]);
    expect(lines).toBeDefined();
  });
});
