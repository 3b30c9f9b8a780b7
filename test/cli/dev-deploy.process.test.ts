import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createManagementClient } from "../../src/management/index.js";
import { REPO_ROOT, startCli } from "../support/run-cli.js";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-deploy-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
  await writeFile(
    join(tmp, "handler.ts"),
    [
      `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};`,
      "export default defineHandler({ handler: ({ input }) => ({ shout: String(input.text).toUpperCase() }) });",
      "",
    ].join("\n"),
  );
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("runlet dev with an endpoint deployed to it", () => {
  it("runs the deployed endpoint's jobs on worker processes of the same handler, and stops them when it is deleted", async () => {
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
    try {
      const [, endpointUrl] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, apiKey] = await dev.waitFor(/api key {3}(\S+) /);
      const origin = new URL(endpointUrl!).origin;
      const mgmt = createManagementClient({ apiKey: apiKey!, baseUrl: origin, maxRetries: 0 });
      const template = await mgmt.templates.create({ name: "shout", image: "me/shout:1", serverless: true });
      const endpoint = await mgmt.serverless.create({
        name: "shout",
        type: "QUEUE",
        scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
        templateId: template.id,
        cpu: [{ id: "cpu3c", vcpuCount: 2 }],
        workers: { min: 0, max: 1 },
      });

      const res = await fetch(`${origin}/v2/${endpoint.id}/runsync`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ input: { text: "deployed" } }),
      });
      const record = (await res.json()) as { id: string; status: string; output?: unknown };
      expect(res.status).toBe(200);
      expect(record).toMatchObject({ status: "COMPLETED", output: { shout: "DEPLOYED" } });
      // The deployed endpoint's worker logs under its own label, and the job is logged.
      await dev.waitFor(new RegExp(`\\[${endpoint.id}/w1\\] INFO {2}worker started`));
      await dev.waitFor(
        new RegExp(
          `job ${record.id} COMPLETED in \\d+ ms \\(queued \\d+ ms\\) output \\{"shout":"DEPLOYED"\\}`,
        ),
      );

      await mgmt.serverless.delete(endpoint.id);
      const gone = await fetch(`${origin}/v2/${endpoint.id}/health`, {
        headers: { authorization: `Bearer ${apiKey}` },
      });
      expect(gone.status).toBe(404);
      // Its worker was stopped (SIGTERM): the worker's shutdown line appears under its label.
      await dev.waitFor(new RegExp(`\\[${endpoint.id}/w1\\] INFO {2}worker stopped`));
    } finally {
      const code = await dev.stop();
      expect(code, dev.output()).toBe(0);
    }
  }, 60_000);
});
