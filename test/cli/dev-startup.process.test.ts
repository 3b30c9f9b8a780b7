import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { afterRestartWindow, REPO_ROOT, startCli } from "../support/run-cli.js";
import { waitForAsync } from "../support/wait-for.js";

// runlet dev and a worker's start-up (docs/cli.md, "runlet dev"): a worker that exits before it
// is ready is not restarted in a loop, and the printed curl stays short whatever test_input.json holds.

const exec = promisify(execFile);
const RUNLET = JSON.stringify(join(REPO_ROOT, "src/index.ts"));

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-startup-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const UNFIT = [
  `import { defineHandler, WorkerUnfitError } from ${RUNLET};`,
  "export default defineHandler({",
  "  healthCheck: () => {",
  '    throw new WorkerUnfitError("gpu", "no CUDA device & driver 0");',
  "  },",
  '  handler: () => "never runs",',
  "});",
  "",
].join("\n");

const FIT = [
  `import { defineHandler } from ${RUNLET};`,
  "export default defineHandler({ handler: ({ input }) => ({ bytes: JSON.stringify(input).length }) });",
  "",
].join("\n");

const STOPPED =
  "runlet dev: worker w1 stopped before it was ready (code 1): it is unfit (gpu: no CUDA device & driver 0). " +
  "Not starting another with the same code: save a change in the handler's folder to try again\n";

async function health(endpoint: string, apiKey: string): Promise<Record<string, number>> {
  const res = await fetch(`${endpoint}/health`, { headers: { authorization: `Bearer ${apiKey}` } });
  return ((await res.json()) as { workers: Record<string, number> }).workers;
}

describe("runlet dev and a worker's start-up", () => {
  it("says why a worker that is unfit at start stopped, starts no other until an edit, and never counts it", async () => {
    const dir = join(tmp, "unfit");
    await rm(dir, { recursive: true, force: true });
    await exec("mkdir", ["-p", dir]);
    const handler = join(dir, "handler.ts");
    await writeFile(handler, UNFIT);
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: dir });
    try {
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, apiKey] = await dev.waitFor(/api key {3}(\S+) /);
      await dev.waitFor(/stopped before it was ready/, 60_000);
      // Before, a new worker was started every second (7 in 15 s, each reloading its model): none
      // is starting once the pool's restart back-off has passed.
      expect(await afterRestartWindow(endpoint!, apiKey!)).toMatchObject({ initializing: 0 });
      const out = dev.output();
      expect(out.split(STOPPED).length - 1, out).toBe(1);
      expect(out).not.toContain("[w2]");
      expect(out).not.toContain("; starting another");
      // The dead worker is not counted: before, /health showed it idle until its heartbeat lapsed.
      expect(await health(endpoint!, apiKey!)).toMatchObject({
        idle: 0,
        ready: 0,
        running: 0,
        initializing: 0,
      });

      await writeFile(handler, FIT);
      await dev.waitFor(/runlet dev: worker w2 ready in \d+ ms \(runlet \d+ ms, fitness \d+ ms\)\n/, 60_000);
      // Ready before its first request reaches the harness: initializing until then, then idle.
      await waitForAsync(
        "the ready worker to count as idle",
        async () => (await health(endpoint!, apiKey!))["idle"] !== 0,
      );
      expect(await health(endpoint!, apiKey!)).toMatchObject({ idle: 1, ready: 1, initializing: 0 });
    } finally {
      expect(await dev.stop()).toBe(0);
    }
  }, 150_000);

  it("points the try line at a large test_input.json instead of printing it, and that curl works", async () => {
    const dir = join(tmp, "large");
    await exec("mkdir", ["-p", dir]);
    await writeFile(join(dir, "handler.ts"), FIT);
    const image = "A".repeat(16_000);
    await writeFile(join(dir, "test_input.json"), JSON.stringify({ input: { image } }));
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: dir });
    try {
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, apiKey] = await dev.waitFor(/api key {3}(\S+) /);
      const [curl, command] = await dev.waitFor(/try {7}(curl .*)\n/, 60_000);
      expect(curl).toBe(
        `try       curl -s -X POST ${endpoint}/runsync -H 'Authorization: Bearer ${apiKey}'` +
          " -H 'Content-Type: application/json' --data-binary '@test_input.json'\n",
      );
      // Run where runlet dev runs, it posts the file.
      const answer = JSON.parse((await exec("sh", ["-c", command!], { cwd: dir })).stdout) as {
        output?: unknown;
      };
      expect(answer.output).toEqual({ bytes: JSON.stringify({ image }).length });
    } finally {
      expect(await dev.stop()).toBe(0);
    }
  }, 120_000);
});
