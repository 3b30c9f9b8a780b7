import { describe, expect, it } from "vitest";
import { createClient } from "../../src/client/index.js";
import { defineHandler } from "../../src/handler/index.js";
import { startHarness } from "../../src/harness/index.js";
import { createManagementClient } from "../../src/management/index.js";
import { resolveWorkerConfig } from "../../src/worker/config.js";

const errorOf = async (fn: () => unknown): Promise<unknown> => {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
};

describe("option validation (one zod-based validator)", () => {
  it("names the option, what was expected and what came, in every public options object", async () => {
    expect(
      await errorOf(() => createClient({ apiKey: "k", baseUrl: "http://x", retryCapMs: 1.5 })),
    ).toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
      message: "retryCapMs must be an integer ≥ 0, got 1.5",
    });
    expect(
      await errorOf(() => createManagementClient({ apiKey: "k", timeoutMs: "9" as never })),
    ).toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
      message: 'timeoutMs must be an integer ≥ 1, got "9"',
    });
    expect(await errorOf(() => startHarness({ limits: { runBytes: 0 } }))).toMatchObject({
      code: "RUNLET_HARNESS_CONFIG",
      message: "limits.runBytes must be an integer ≥ 1, got 0",
    });
    expect(await errorOf(() => startHarness({ endpoints: [{ id: "a", minWorkers: -1 }] }))).toMatchObject({
      code: "RUNLET_HARNESS_CONFIG",
      message: "endpoints[a].minWorkers must be an integer ≥ 0, got -1",
    });
    expect(
      await errorOf(() =>
        resolveWorkerConfig({
          env: { RUNPOD_WEBHOOK_GET_JOB: "http://x/take", RUNPOD_WEBHOOK_POST_OUTPUT: "http://x/done" },
          retryBaseMs: 0,
          handleSignals: "yes" as never,
        }),
      ),
    ).toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
      message:
        'startWorker: handleSignals must be true or false, got "yes"; retryBaseMs must be an integer ≥ 1, got 0',
    });
    const platform = { RUNPOD_WEBHOOK_GET_JOB: "http://x/take", RUNPOD_WEBHOOK_POST_OUTPUT: "http://x/done" };
    expect(
      await errorOf(() => resolveWorkerConfig({ env: platform, sidecarBaseEnv: "PATH=/bin" as never })),
    ).toMatchObject({
      code: "RUNLET_CONFIG_INVALID",
      message:
        'startWorker: sidecarBaseEnv must be an object of environment variables (usually process.env), got "PATH=/bin"',
    });
    // What is given is what the sidecars inherit; nothing of this process's own is added.
    const base = { PATH: "/bin" };
    expect(resolveWorkerConfig({ env: platform, sidecarBaseEnv: base }).sidecarBaseEnv).toBe(base);
    expect(resolveWorkerConfig({ env: platform }).sidecarBaseEnv).toEqual({});
    expect(await errorOf(() => defineHandler({ handler: () => 1, hardStopGraceMs: -5 }))).toMatchObject({
      code: "RUNLET_HANDLER_INVALID",
      message: "defineHandler: hardStopGraceMs must be an integer ≥ 0, got -5",
    });
  });
});
