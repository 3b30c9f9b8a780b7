import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";
import { startReceiver } from "../support/otlp-receiver.js";
import { startRunletChild, stopRunletChild } from "../support/runlet-child.js";
import { testHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * Telemetry off: nothing is sent, and no OpenTelemetry package is loaded. The second is shown in
 * a real `runlet start` child whose module resolution refuses every `@opentelemetry/` package (a
 * resolve hook): with telemetry off its jobs run; on, it stops at start naming the packages.
 * Uses dist/ (run `node scripts/build.mjs` first).
 */

let tmp: string;
let hookFlag: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-otel-off-"));
  const hooks = join(tmp, "hooks.mjs");
  await writeFile(
    hooks,
    `export async function resolve(specifier, context, next) {
  if (specifier.startsWith("@opentelemetry/")) {
    const err = new Error("Cannot find package '" + specifier + "' imported from " + context.parentURL);
    err.code = "ERR_MODULE_NOT_FOUND";
    throw err;
  }
  return next(specifier, context);
}\n`,
  );
  const register = join(tmp, "register.mjs");
  await writeFile(
    register,
    `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
  );
  hookFlag = `--import=${pathToFileURL(register).href}`;
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("telemetry off", () => {
  it("sends nothing when the option says false or OTEL_SDK_DISABLED=true, even with an endpoint set", async () => {
    const receiver = await startReceiver();
    try {
      await using h = await testHarness();
      const handler = defineHandler({ input: z.object({}), handler: () => "ok" });
      const env = { ...h.workerEnv("local"), OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url };
      for (const options of [{ env, telemetry: false }, { env: { ...env, OTEL_SDK_DISABLED: "true" } }]) {
        const worker = await workerFor(h, handler, options);
        const id = h.enqueue("local", { input: {} });
        await waitFor("the job to complete", () => h.job(id)?.status === "COMPLETED");
        await worker.close();
      }
      // The same worker with telemetry on does send (so the two above could have failed).
      const worker = await workerFor(h, handler, { env });
      const id = h.enqueue("local", { input: {} });
      await waitFor("the job to complete", () => h.job(id)?.status === "COMPLETED");
      expect(receiver.requests).toEqual([]);
      await worker.close();
      expect(receiver.requests.map((r) => r.path).sort()).toEqual(["/v1/metrics", "/v1/traces"]);
      expect(receiver.requests[0]?.contentType).toBe("application/json");
    } finally {
      await receiver.close();
    }
  });

  it("loads no OpenTelemetry package in `runlet start` without an endpoint; with one and no packages, exits 1 naming them", async () => {
    await using h = await testHarness();
    const off = startRunletChild(h, "test/fixtures/echo-plain.mjs", {
      podId: "pod-off",
      env: { NODE_OPTIONS: hookFlag, OTEL_SERVICE_NAME: "ignored-without-an-endpoint" },
    });
    try {
      const job = await h.waitForJob(h.enqueue("local", { input: { a: 1 } }), { timeoutMs: 20_000 });
      expect(job.status, off.output()).toBe("COMPLETED");
      off.child.kill("SIGTERM");
      expect(await off.exited).toEqual({ code: 0, signal: null });
    } finally {
      await stopRunletChild(off);
    }
    const on = startRunletChild(h, "test/fixtures/echo-plain.mjs", {
      podId: "pod-on",
      env: { NODE_OPTIONS: hookFlag, OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" },
    });
    try {
      expect(await on.exited).toEqual({ code: 1, signal: null });
      expect(on.output()).toContain("RUNLET_MISSING_PEER");
      expect(on.output()).toMatch(/npm install @opentelemetry\/api@\^1\.10\.0 /);
    } finally {
      await stopRunletChild(on);
    }
  }, 60_000);
});
