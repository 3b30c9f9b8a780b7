import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { createHarness, ManualClock } from "../../src/testing/index.js";
import { REPO_ROOT, runNode } from "../support/run-cli.js";
import { waitFor } from "../support/wait-for.js";

const upperPath = fileURLToPath(new URL("../fixtures/upper-handler.ts", import.meta.url));

const double = defineHandler({
  input: z.object({ n: z.number().int() }),
  handler: ({ input }) => ({ doubled: input.n * 2 }),
});

describe("runlet/testing createHarness", () => {
  it("runs a handler in a few lines: runsync through the client", async () => {
    await using h = await createHarness({ handler: double });
    const record = await h.endpoint.runsync({ input: { n: 21 } });
    expect(record).toMatchObject({ status: "COMPLETED", output: { doubled: 42 } });
    expect(record.id).toMatch(/^sync-/);
    expect(h.url).toBe(h.harness.url);
    expect(h.apiKey).toBe(h.harness.apiKey);
  });

  it("starts its workers with production's environment: they take under their own id and carry the GPU type in gpu=", async () => {
    await using h = await createHarness({ handler: double, gpuTypeId: "TEST-GPU" });
    expect((await h.endpoint.runsync({ input: { n: 1 } })).output).toEqual({ doubled: 2 });
    // The heartbeat runs on its own thread, whose first ping may come after the job.
    await waitFor("the first ping", () => h.harness.requests({ route: "ping" }).length > 0);
    const requests = h.harness.requests({ endpointId: "local" });
    const routes = new Set(requests.map((r) => r.route));
    expect([...routes]).toEqual(expect.arrayContaining(["job-done", "job-take", "ping"]));
    for (const r of requests) {
      // /v2/local/<route>/<worker id>[/<job id>]: the worker id is the pod id, whatever the template's placeholder.
      expect({ route: r.route, worker: r.path.split("/")[4], gpu: r.query["gpu"] }).toEqual({
        route: r.route,
        worker: "local-worker-1",
        gpu: "TEST-GPU",
      });
    }
  });

  it("fails a job whose input does not match the handler's schema", async () => {
    await using h = await createHarness({ handler: double });
    const record = await h.endpoint.runsync({ input: { n: "x" } as unknown as { n: number } });
    expect(record.status).toBe("FAILED");
    expect(record.error).toContain("n");
  });

  it("loads a handler from a file", async () => {
    await using h = await createHarness({ handlerPath: upperPath });
    expect((await h.endpoint.runsync({ input: { text: "abc" } })).output).toEqual({ text: "ABC" });
  });

  it("streams a generator handler's items through the client", async () => {
    const letters = defineHandler({
      input: z.object({ text: z.string() }),
      async *handler({ input }) {
        for (const letter of input.text) yield letter.toUpperCase();
      },
    });
    await using h = await createHarness({ handler: letters, streamHoldMs: 100 });
    const { id } = await h.endpoint.run({ input: { text: "abc" } });
    const items: unknown[] = [];
    for await (const item of h.endpoint.stream(id)) items.push(item);
    expect(items).toEqual(["A", "B", "C"]);
    expect((await h.endpoint.status(id)).status).toBe("COMPLETED");
  });

  it("serves several endpoints, each with its own handler and workers", async () => {
    await using h = await createHarness({
      endpoints: [
        { id: "double", handler: double, workers: 2 },
        { id: "upper", handlerPath: upperPath },
      ],
    });
    const [a, b] = await Promise.all([
      h.client.endpoint("double").runsync({ input: { n: 2 } }),
      h.client.endpoint("upper").runsync({ input: { text: "hi" } }),
    ]);
    expect([a.output, b.output]).toEqual([{ doubled: 4 }, { text: "HI" }]);
    await expect
      .poll(() => h.harness.health("double").workers.idle + h.harness.health("double").workers.running)
      .toBe(2);
  });

  it("starts another in-process worker when jobs wait, up to maxWorkers", async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const gate = defineHandler({
      input: z.object({}),
      handler: async () => {
        await released;
        return "done";
      },
    });
    await using h = await createHarness({
      endpoints: [{ id: "local", handler: gate, workers: 1, maxWorkers: 2 }],
    });
    const ids = [
      (await h.endpoint.run({ input: {} })).id,
      (await h.endpoint.run({ input: {} })).id,
      (await h.endpoint.run({ input: {} })).id,
    ];
    // Two workers (one each), never a third: the last job waits.
    await expect.poll(() => h.harness.health("local").jobs.inProgress).toBe(2);
    expect(h.harness.health("local")).toMatchObject({
      jobs: { inProgress: 2, inQueue: 1 },
      workers: { running: 2, initializing: 0 },
    });
    expect(new Set(ids.slice(0, 2).map((id) => h.harness.job(id)?.workerId))).toEqual(
      new Set(["local-worker-1", "local-worker-2"]),
    );
    release();
    for (const id of ids) expect((await h.harness.waitForJob(id)).output).toBe("done");
  });

  it("takes a manual clock: result retention elapses without waiting", async () => {
    const clock = new ManualClock();
    await using h = await createHarness({ handler: double, clock });
    const { id } = await h.endpoint.run({ input: { n: 1 } });
    expect((await h.harness.waitForJob(id)).status).toBe("COMPLETED");
    clock.advance(30 * 60_000);
    await expect(h.endpoint.status(id)).rejects.toMatchObject({ code: "RUNLET_CLIENT_HTTP" });
  });

  it("refuses an endpoint with workers but no handler", async () => {
    await expect(createHarness({ endpoints: [{ id: "x", workers: 1 }] })).rejects.toMatchObject({
      code: "RUNLET_HARNESS_CONFIG",
      message: 'endpoint "x" has workers but no handler or handlerPath',
    });
  });

  it("takes a .ts handlerPath alone in plain Node, as a user's test importing runlet from its package runs it", async () => {
    // Under vitest, src/ is transformed and a .ts import works anyway: plain Node importing dist/
    // is where `Unknown file extension ".ts"` came from.
    const script = [
      `import { createHarness } from ${JSON.stringify(`${REPO_ROOT}dist/testing/index.js`)};`,
      `const h = await createHarness({ handlerPath: ${JSON.stringify(fileURLToPath(new URL("../fixtures/slow.ts", import.meta.url)))} });`,
      "const record = await h.endpoint.runsync({ input: { ms: 1 } });",
      "await h.close();",
      "process.stdout.write(JSON.stringify(record.output));",
    ].join("\n");
    const run = await runNode(["--input-type=module", "-e", script]);
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe('{"slept":1}');
    expect(run.code).toBe(0);
  }, 60_000);
});
