import { describe, expect, it } from "vitest";
import { inheritedEnv } from "../../src/cli/worker-pool.js";
import { FITNESS_ENV } from "../../src/protocol/index.js";
import { INIT_TIMEOUT_ENV } from "../../src/worker/startup-budget.js";

/**
 * What a worker started by `runlet dev`, `runlet test` or the build's verify step inherits from
 * the CLI's environment: none of the platform's variables (the harness gives its own), but the
 * user's settings for the worker — the fitness thresholds and the start-up budget.
 */
describe("inheritedEnv", () => {
  const source = {
    PATH: "/bin",
    HOME: "/home/u",
    RUNPOD_AI_API_KEY: "real-key",
    RUNPOD_WEBHOOK_GET_JOB: "https://platform.example/job-take",
    RUNPOD_ENDPOINT_ID: "prod",
    RUNPOD_POD_ID: "pod-1",
    [INIT_TIMEOUT_ENV]: "1800",
    [FITNESS_ENV.minMemoryGb]: "4",
  };

  it("passes RUNPOD_INIT_TIMEOUT and the fitness thresholds, drops the platform's variables", () => {
    const env = inheritedEnv(source);
    expect(INIT_TIMEOUT_ENV).toBe("RUNPOD_INIT_TIMEOUT");
    expect(env["RUNPOD_INIT_TIMEOUT"]).toBe("1800");
    expect(env[FITNESS_ENV.minMemoryGb]).toBe("4");
    expect(env["PATH"]).toBe("/bin");
    expect(env["HOME"]).toBe("/home/u");
    for (const name of [
      "RUNPOD_AI_API_KEY",
      "RUNPOD_WEBHOOK_GET_JOB",
      "RUNPOD_ENDPOINT_ID",
      "RUNPOD_POD_ID",
    ]) {
      expect(env, name).not.toHaveProperty(name);
    }
  });
});
