import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { alive, eventsOf, fixtureSidecar, freePort, scratch } from "../support/sidecar-rig.js";
import { gate, logSink, testHarness, waitFor, workerFor } from "../support/workers.js";

// A worker (in this process) against the harness over loopback, with the fixture model server as
// its sidecar: a real child process, started, waited for, watched and stopped by the worker.

function unhealthyPings(h: Harness) {
  return h.requests({ route: "ping" }).filter((r) => r.query["status"] === "unhealthy");
}

describe("a worker with a sidecar", () => {
  it("takes no job before its sidecar answers, and gives the handler its URL", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const sink = logSink();
    // Queued before the worker starts: a take before the sidecar is ready would run it against a 503.
    const id = h.enqueue("local", { input: {} });
    const w = await workerFor(
      h,
      defineHandler({
        sidecar: fixtureSidecar(port, { READY_AFTER_MS: "700", EVENTS_FILE: tmp.events }),
        handler: async ({ sidecar, sidecars }) => {
          const res = await fetch(`${sidecar.url}/health`);
          return { status: res.status, url: sidecar.url, names: Object.keys(sidecars) };
        },
      }),
      // As `runlet start` and a bundle do: the process's environment is the sidecars' base.
      { sink, sidecarBaseEnv: process.env },
    );
    try {
      const job = await h.waitForJob(id, { timeoutMs: 20_000 });
      expect(job.output).toEqual({ status: 200, url: `http://127.0.0.1:${port}`, names: ["llm"] });
      const messages = sink.lines.map((l) => l["message"]);
      const ready = messages.indexOf("sidecars ready");
      expect(ready).toBeGreaterThan(messages.indexOf('sidecar "llm" is ready'));
      expect(ready).toBeLessThan(messages.indexOf("Started."));
      // It inherits the caller's environment (PATH) but not the worker's API key.
      expect(eventsOf(tmp.events)[0]).toMatchObject({ event: "started", apiKey: null, hasPath: true });
    } finally {
      await w.close();
    }
  }, 30_000);

  it("gives setup its sidecars' URLs, with the sidecar already answering", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const id = h.enqueue("local", { input: {} });
    const w = await workerFor(
      h,
      defineHandler({
        sidecar: fixtureSidecar(port, { READY_AFTER_MS: "300", EVENTS_FILE: tmp.events }),
        // A warm-up request from setup, as docs/models.md suggests: the server answers by now.
        async setup({ sidecar, sidecars }) {
          const url = sidecar?.url;
          const warmUp = url === undefined ? undefined : (await fetch(`${url}/health`)).status;
          return { url, names: Object.keys(sidecars ?? {}), warmUp };
        },
        handler: ({ state, sidecar }) => ({ ...state, handlerUrl: sidecar.url }),
      }),
    );
    try {
      const job = await h.waitForJob(id, { timeoutMs: 20_000 });
      const url = `http://127.0.0.1:${port}`;
      expect(job.output).toEqual({ url, names: ["llm"], warmUp: 200, handlerUrl: url });
    } finally {
      await w.close();
    }
  }, 30_000);

  it("inherits the environment its caller passes as sidecarBaseEnv, never the process's own", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    // Set in this process only: library code reading process.env would hand it to the sidecar.
    process.env["RUNLET_FIXTURE_PROCESS_ONLY"] = "leaked";
    try {
      const w = await workerFor(
        h,
        defineHandler({
          sidecar: fixtureSidecar(port, { EVENTS_FILE: tmp.events }),
          handler: () => "ok",
        }),
        { sidecarBaseEnv: { RUNLET_FIXTURE_BASE: "from the caller", RUNPOD_AI_API_KEY: "base-key" } },
      );
      try {
        const started = await waitFor("the sidecar's start", () => eventsOf(tmp.events)[0]);
        // No PATH either: the caller passed none (the command is an absolute path).
        expect(started).toMatchObject({ fromBase: "from the caller", fromProcess: null, hasPath: false });
        // The API key is withheld whichever environment holds it.
        expect(started["apiKey"]).toBeNull();
      } finally {
        await w.close();
      }
    } finally {
      delete process.env["RUNLET_FIXTURE_PROCESS_ONLY"];
    }
  }, 30_000);

  it("is unfit at once when its sidecar dies while starting: check=sidecar, its exit and last lines, no take", async () => {
    await using h = await testHarness();
    const port = await freePort();
    h.enqueue("local", { input: {} });
    const w = await workerFor(
      h,
      defineHandler({
        sidecar: fixtureSidecar(port, { CRASH_AT_START: "7" }),
        handler: () => "never",
      }),
      { podId: "pod-sidecar-dies" },
    );
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    expect(unhealthyPings(h).map((r) => [r.query["check"], r.query["reason"]])).toEqual([
      [
        "sidecar",
        'sidecar "llm" exited with code 7 while starting; its last lines: fatal: model file not found: /models/missing.gguf',
      ],
    ]);
    expect(h.requests({ route: "job-take" })).toEqual([]);
  }, 30_000);

  it("fails its running jobs naming the sidecar and its exit, pings unhealthy and stops with exit code 1 when the sidecar dies", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const running = gate();
    const w = await workerFor(
      h,
      defineHandler({
        concurrency: 2,
        sidecar: fixtureSidecar(port, { EVENTS_FILE: tmp.events }),
        handler: async ({ signal }) => {
          running.open();
          // A job that waits on the model until it is stopped.
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
          throw signal.reason;
        },
      }),
      { podId: "pod-sidecar-crash" },
    );
    const a = h.enqueue("local", { input: {} });
    const b = h.enqueue("local", { input: {} });
    await running.promise;
    await waitFor(
      "both jobs to run",
      () => h.job(a)?.status === "IN_PROGRESS" && h.job(b)?.status === "IN_PROGRESS",
    );
    await fetch(`http://127.0.0.1:${port}/crash?code=3`, { method: "POST" });
    expect(await w.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    const reason =
      'sidecar "llm" exited with code 3 while the worker ran; its last lines: model loading | a line on stderr | crashing on request with code 3';
    for (const id of [a, b]) {
      const job = await h.waitForJob(id, { timeoutMs: 10_000 });
      expect(job.status).toBe("FAILED");
      expect(job.error).toBe(`worker shutting down: ${reason}`);
    }
    expect(unhealthyPings(h).map((r) => [r.query["check"], r.query["reason"]])).toEqual([
      ["sidecar", reason],
    ]);
  }, 30_000);

  it("stops its sidecar at shutdown only after the running jobs ended", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const running = gate();
    const finish = gate();
    const w = await workerFor(
      h,
      defineHandler({
        sidecar: fixtureSidecar(port, { EVENTS_FILE: tmp.events }),
        handler: async ({ sidecar }) => {
          running.open();
          await finish.promise;
          // Still answering after close() was called: the sidecar outlives the job.
          const res = await fetch(`${sidecar.url}/v1/models`);
          return (await res.json()) as unknown;
        },
      }),
    );
    const id = h.enqueue("local", { input: {} });
    await running.promise;
    const closed = w.close();
    // close() has begun: the worker takes nothing more, and the sidecar must still be up.
    await waitFor("the take loop to stop", () => w.jobIds.length === 1);
    expect(eventsOf(tmp.events).map((e) => e.event)).toEqual(["started"]);
    finish.open();
    await closed;
    const job = await h.waitForJob(id);
    expect(job.status).toBe("COMPLETED");
    expect(job.output).toEqual({ object: "list", data: [{ id: "fixture-model", object: "model" }] });
    const events = eventsOf(tmp.events);
    expect(events.map((e) => e.event)).toEqual(["started", "sigterm"]);
    expect(alive(events[0]!["pid"] as number)).toBe(false);
  }, 30_000);

  it("stops a sidecar that is still starting when the worker closes", async () => {
    using tmp = scratch();
    await using h = await testHarness();
    const port = await freePort();
    const w = await workerFor(
      h,
      defineHandler({
        sidecar: fixtureSidecar(port, { READY_AFTER_MS: "3600000", EVENTS_FILE: tmp.events }),
        handler: () => "never",
      }),
    );
    await waitFor("the sidecar to start", () => eventsOf(tmp.events).length > 0);
    await w.close();
    expect(await w.stopped).toEqual({ reason: "closed", exitCode: 0 });
    const pid = eventsOf(tmp.events)[0]!["pid"] as number;
    await waitFor("the sidecar to be gone", () => !alive(pid), 5_000);
    expect(h.requests({ route: "job-take" })).toEqual([]);
  }, 30_000);

  it("gives an isolation thread's handler the same sidecar URL", async () => {
    await using h = await testHarness();
    const port = await freePort();
    process.env["SIDECAR_THREAD_PORT"] = String(port);
    try {
      const { default: definition } = await import("../fixtures/sidecar-thread.js");
      const module = fileURLToPath(new URL("../fixtures/sidecar-thread.ts", import.meta.url));
      await using _w = await workerFor(h, definition, { handlerModule: module });
      const id = h.enqueue("local", { input: {} });
      const job = await h.waitForJob(id, { timeoutMs: 20_000 });
      expect(job.output).toEqual({ url: `http://127.0.0.1:${port}`, status: 200 });
    } finally {
      delete process.env["SIDECAR_THREAD_PORT"];
    }
  }, 30_000);
});
