import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli, startCli } from "../support/run-cli.js";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A handler that sleeps `ms` and answers with its code version, so a test can tell old code from new. */
function handlerSource(version: number): string {
  return [
    'import { setTimeout as sleep } from "node:timers/promises";',
    `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};`,
    "export default defineHandler({",
    `  handler: async ({ input, signal }) => {`,
    "    await sleep(input.ms ?? 0, undefined, { signal });",
    `    return { version: ${version}, tag: input.tag };`,
    "  },",
    "});",
    "",
  ].join("\n");
}

describe("runlet dev", () => {
  it("answers a request, logs the job, and reloads workers without losing queued jobs", async () => {
    const handler = join(tmp, "handler.ts");
    await writeFile(handler, handlerSource(1));
    await writeFile(join(tmp, "test_input.json"), '{"input": {"tag": "sample"}}');
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
    try {
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, apiKey] = await dev.waitFor(/api key {3}(\S+) /);
      const [curl] = await dev.waitFor(/try {7}curl .*\n/);
      expect(curl).toBe(
        `try       curl -s -X POST ${endpoint}/runsync -H 'Authorization: Bearer ${apiKey}'` +
          ` -H 'Content-Type: application/json' -d '{"input":{"tag":"sample"}}'\n`,
      );
      await dev.waitFor(/\[w1\] INFO {2}worker started/);
      const post = async (route: string, input: unknown) => {
        const res = await fetch(`${endpoint}/${route}`, {
          method: "POST",
          headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
          body: JSON.stringify({ input }),
        });
        expect(res.status).toBe(200);
        return (await res.json()) as { id: string; status: string; output?: unknown };
      };

      // What the printed curl does.
      const first = await post("runsync", { tag: "sample" });
      expect(first.status).toBe("COMPLETED");
      expect(first.output).toEqual({ version: 1, tag: "sample" });
      await dev.waitFor(
        new RegExp(
          `job ${first.id} COMPLETED in \\d+ ms \\(queued \\d+ ms\\) output \\{"version":1,"tag":"sample"\\}`,
        ),
      );

      // A long job holds the only worker; two more wait in the queue while the code changes.
      const running = await post("run", { ms: 4000, tag: "running" });
      await dev.waitFor(new RegExp(`\\[w1\\] INFO {2}Started\\. job=${running.id}`));
      const queued = [await post("run", { tag: "q1" }), await post("run", { tag: "q2" })];
      await writeFile(handler, handlerSource(2));
      await dev.waitFor(/handler\.ts changed; reloading workers/);
      await dev.waitFor(/\[w2\] INFO {2}worker started/);

      const final = async (id: string) => {
        for (;;) {
          const res = await fetch(`${endpoint}/status/${id}`, {
            headers: { Authorization: `Bearer ${apiKey}` },
          });
          const body = (await res.json()) as { status: string; output?: unknown };
          if (body.status !== "IN_QUEUE" && body.status !== "IN_PROGRESS") return body;
          await sleep(100);
        }
      };
      // The old worker finishes the job it held with the old code; the queued jobs run on the new code.
      expect(await final(running.id)).toMatchObject({
        status: "COMPLETED",
        output: { version: 1, tag: "running" },
      });
      for (const [i, job] of queued.entries()) {
        expect(await final(job.id)).toMatchObject({
          status: "COMPLETED",
          output: { version: 2, tag: `q${i + 1}` },
        });
      }
    } finally {
      const code = await dev.stop();
      expect(code, dev.output()).toBe(0);
    }
  }, 60_000);

  it("exits 1 with what to do when the port is taken", async () => {
    const { createServer } = await import("node:http");
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = blocker.address() as { port: number };
      await writeFile(join(tmp, "handler.ts"), handlerSource(1));
      const r = await runCli(["dev", "handler.ts", "--port", String(port)], { cwd: tmp });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `runlet dev: port ${port} is in use; pass --port N (0 picks a free one) (RUNLET_HARNESS_CONFIG)\n`,
      );
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it("exits 2 for a port that is not a number", async () => {
    const r = await runCli(["dev", "handler.ts", "--port", "eighty"], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'runlet dev: --port must be an integer from 0 to 65535, got "eighty" (RUNLET_CLI_USAGE)\n',
    );
  });
});
