import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Manifest, readManifest } from "../../src/cache/index.js";
import { defineHandler } from "../../src/handler/index.js";
import { call, gate, post, startLbWorker } from "../support/lb-support.js";
import { type Receiver, startReceiver } from "../support/otlp-receiver.js";
import { fixtureSidecar, freePort, scratch } from "../support/sidecar-rig.js";
import { waitFor, waitForAsync } from "../support/wait-for.js";

/**
 * The parts a load-balancing worker composes (src/worker/lifecycle/parts.ts) run for real in this
 * mode: telemetry to a real OTLP/HTTP receiver, the warm cache on a volume folder, a real sidecar
 * process, and request ids in the log lines.
 */

describe("load-balancing worker parts", () => {
  let receiver: Receiver;
  let tmp: string;
  beforeEach(async () => {
    receiver = await startReceiver();
    tmp = await mkdtemp(join(tmpdir(), "runlet-lb-parts-"));
  });
  afterEach(async () => {
    await receiver.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it("exports the request's job span, with its request id, to the OTLP receiver", async () => {
    const lb = await startLbWorker(defineHandler({ handler: () => "traced" }), {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "lb-otel" },
    });
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const answer = await post(`${lb.url}/runsync`, { input: {} });
    expect(answer.status).toBe(200);
    const body = JSON.parse(answer.text) as { id: string; output: unknown };
    expect(body.output).toBe("traced");
    await lb.worker.close();
    const job = await waitFor("the job span", () =>
      receiver.spans.find((s) => s.name === "runlet.job" && s.attributes["runlet.job.id"] === body.id),
    );
    expect(job.resource["service.name"]).toBe("lb-otel");
    expect(receiver.spans.some((s) => s.name === "runlet.handler" && s.parentSpanId === job.spanId)).toBe(
      true,
    );
  });

  it("hydrates the warm cache before ready (health 204, then 200), serves, and syncs to the volume at close", async () => {
    const volume = join(tmp, "volume");
    const dir = join(tmp, "container", "hf");
    await mkdir(volume, { recursive: true });
    await mkdir(dir, { recursive: true });
    const setupGate = gate();
    let setupStarted = false;
    const lb = await startLbWorker(
      defineHandler({
        warmCache: { dirs: [{ path: dir, name: "hf" }], volume, smallFileBytes: 1024 },
        setup: async () => {
          setupStarted = true;
          await setupGate.promise;
          return {};
        },
        handler: async () => {
          await writeFile(join(dir, "made.txt"), "made by a request");
          return "cached";
        },
      }),
      { env: { RUNPOD_ENDPOINT_ID: "ep1" }, shutdownGraceMs: 1_000 },
    );
    await waitFor("setup to start", () => setupStarted);
    expect((await call(`${lb.url}/ping`)).status).toBe(204);
    setupGate.open();
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const hydrate = lb.lines.find((l) => l["cache"] === "hydrate");
    expect(hydrate).toBeDefined();
    const answer = await post(`${lb.url}/runsync`, { input: {} });
    expect(JSON.parse(answer.text)).toMatchObject({ status: "COMPLETED", output: "cached" });
    await lb.worker.close();
    const manifest = (await readManifest(join(volume, ".runlet-cache", "ep1"))) as Manifest;
    expect(manifest.files.map((f) => f.path)).toContain("made.txt");
  });

  it("stays 204 until its sidecar is ready, serves a request that calls it, and goes unhealthy and stops when it dies", async () => {
    using s = scratch();
    const port = await freePort();
    const lb = await startLbWorker(
      defineHandler({
        sidecar: fixtureSidecar(port, { READY_AFTER_MS: "700", EVENTS_FILE: s.events }),
        handler: async ({ sidecar }) => (await fetch(`${sidecar.url}/health`)).status,
      }),
      { shutdownGraceMs: 1_000 },
    );
    try {
      expect((await call(`${lb.url}/ping`)).status).toBe(204);
      await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
      const answer = await post(`${lb.url}/runsync`, { input: {} });
      expect(JSON.parse(answer.text)).toMatchObject({ status: "COMPLETED", output: 200 });
      await fetch(`http://127.0.0.1:${port}/crash?code=3`, { method: "POST" }).catch(() => undefined);
      // The worker is unfit at once: it logs check=sidecar and stops with exit code 1, so health no
      // longer answers 2xx (503 while the port is still open, then nothing: the port is closed).
      expect(await lb.worker.stopped).toMatchObject({ reason: "unhealthy", exitCode: 1 });
      expect(lb.lines.find((l) => l["code"] === "RUNLET_WORKER_UNFIT")).toMatchObject({ check: "sidecar" });
      const after = await call(`${lb.url}/ping`).then(
        (a) => a.status,
        () => "refused",
      );
      expect(after === "refused" || after === 503).toBe(true);
    } finally {
      await lb.worker.close();
    }
  });

  it("puts the request's id on its log lines", async () => {
    const lb = await startLbWorker(
      defineHandler({
        handler: ({ log }) => {
          log.info("inside the handler");
          return "logged";
        },
      }),
    );
    try {
      await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
      const answer = await post(`${lb.url}/runsync`, { input: {} });
      const id = (JSON.parse(answer.text) as { id: string }).id;
      const line = await waitFor("the handler's line", () =>
        lb.lines.find((l) => l["message"] === "inside the handler"),
      );
      expect(id).toMatch(/^lb-/);
      expect(line["requestId"]).toBe(id);
      expect(lb.lines.find((l) => l["message"] === "request answered")?.["requestId"]).toBe(id);
    } finally {
      await lb.worker.close();
    }
  });
});
