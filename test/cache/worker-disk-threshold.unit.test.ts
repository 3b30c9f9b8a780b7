import { access } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { defineHandler } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";
import { BIG, cacheFixture, put } from "../support/cache-fixture.js";
import { logSink, memoryHarness } from "../support/workers.js";

// The worker hands its fitness `disk` threshold (RUNPOD_MIN_DISK_PERCENT) to the warm cache's
// hydrate (docs/fitness.md, "Warm cache"): at 100 % no file can be restored, so the hydrate leaves
// the volume's file cold and says so, where the default 10 % restores it on this machine's disk.

let fixture: Awaited<ReturnType<typeof cacheFixture>> | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

async function hydrateWith(minDiskPercent: string | undefined) {
  fixture = await cacheFixture();
  const { volume, container } = await fixture.setup();
  const a = container("a");
  await put(a.dir, "model.bin", BIG);
  expect((await a.cache.sync()).status).toBe("synced");
  const b = container("b");
  await using h = memoryHarness();
  const sink = logSink();
  const w = await startWorker(
    defineHandler({
      warmCache: { dirs: [{ path: b.dir, name: "hf" }], volume, smallFileBytes: 1024 },
      handler: async () => "served",
    }),
    {
      env: {
        ...h.workerEnv("local", { podId: "pod-disk" }),
        RUNPOD_ENDPOINT_ID: "ep1",
        ...(minDiskPercent === undefined ? {} : { RUNPOD_MIN_DISK_PERCENT: minDiskPercent }),
      },
      fitnessChecks: false,
      connect: () => h.connect(),
      logDestination: sink.stream,
      shutdownGraceMs: 1_000,
      flushTimeoutMs: 1_000,
    },
  );
  expect((await h.waitForJob(h.enqueue("local", { input: {} }))).output).toBe("served");
  await w.close();
  const restored = await access(join(b.dir, "model.bin")).then(
    () => true,
    () => false,
  );
  return { restored, sink };
}

describe("the worker's warm cache keeps the fitness disk threshold", () => {
  it("leaves a file cold when RUNPOD_MIN_DISK_PERCENT=100 leaves no room", async () => {
    const { restored, sink } = await hydrateWith("100");
    expect(restored).toBe(false);
    expect(
      sink.lines.some((l) => /less than 100 % of the disk free/.test(String(l["message"]))),
      JSON.stringify(sink.lines.filter((l) => l["cache"] !== undefined)),
    ).toBe(true);
  });

  it("restores it under the default threshold (so the case above can fail)", async () => {
    const { restored } = await hydrateWith(undefined);
    expect(restored).toBe(true);
  });
});
