import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, startCli } from "../support/run-cli.js";
import { alive, eventsOf, FIXTURE_SERVER, freePort } from "../support/sidecar-rig.js";
import { waitFor } from "../support/workers.js";

// `runlet dev` (the built CLI, as a process) with a handler whose sidecar is the fixture model
// server: an edit to the handler keeps the sidecar; an edit to its settings restarts it.

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-sidecar-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

function handlerSource(version: number, port: number, events: string, model: string): string {
  return [
    `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};`,
    "export default defineHandler({",
    "  sidecar: {",
    '    name: "llm",',
    `    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FIXTURE_SERVER)}],`,
    `    env: { PORT: "${port}", EVENTS_FILE: ${JSON.stringify(events)}, MODEL: "${model}" },`,
    `    ready: { url: "http://127.0.0.1:${port}/health" },`,
    "    readyIntervalMs: 20,",
    "    stopGraceMs: 1000,",
    "  },",
    "  handler: async ({ sidecar }) => {",
    '    const res = await fetch(sidecar.url + "/health");',
    `    return { version: ${version}, sidecar: res.status };`,
    "  },",
    "});",
    "",
  ].join("\n");
}

describe("runlet dev with a sidecar", () => {
  it("keeps the sidecar across handler edits, restarts it when its settings change, and stops it on exit", async () => {
    const port = await freePort();
    const events = join(tmp, "events.jsonl");
    const handler = join(tmp, "handler.ts");
    await writeFile(handler, handlerSource(1, port, events, "a"));
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
    const started = () => eventsOf(events).filter((e) => e.event === "started");
    try {
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, apiKey] = await dev.waitFor(/api key {3}(\S+) /);
      const run = async () => {
        const res = await fetch(`${endpoint}/runsync`, {
          method: "POST",
          headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
          body: JSON.stringify({ input: {} }),
        });
        // A job sent while the worker restarts may come back without an output (still queued at
        // runsync's wait, or failed by the stopping worker): the loops below send another.
        return ((await res.json()) as { output?: unknown }).output;
      };
      expect(await run()).toEqual({ version: 1, sidecar: 200 });
      expect(started()).toHaveLength(1);
      const firstPid = started()[0]!["pid"] as number;

      // The handler changes, its sidecar does not: the new worker uses the running server.
      await writeFile(handler, handlerSource(2, port, events, "a"));
      await dev.waitFor(/sidecar "llm" kept \(its settings did not change\)/);
      let out: unknown;
      for (let i = 0; i < 50; i++) {
        out = await run();
        if ((out as { version?: number } | undefined)?.version === 2) break;
      }
      expect(out).toEqual({ version: 2, sidecar: 200 });
      expect(started()).toHaveLength(1);
      expect(alive(firstPid)).toBe(true);

      // Its settings change: the old server is stopped and a new one started.
      await writeFile(handler, handlerSource(3, port, events, "b"));
      await dev.waitFor(/sidecar "llm" changed; restarting it/);
      for (let i = 0; i < 50; i++) {
        out = await run();
        if ((out as { version?: number } | undefined)?.version === 3) break;
      }
      expect(out).toEqual({ version: 3, sidecar: 200 });
      expect(started()).toHaveLength(2);
      expect(alive(firstPid)).toBe(false);
      // Its lines reach runlet dev's output.
      expect(dev.output()).toContain("model loading");
    } finally {
      const code = await dev.stop();
      expect(code, dev.output()).toBe(0);
    }
    const last = started().at(-1)!["pid"] as number;
    await waitFor("the sidecar to be gone after runlet dev", () => !alive(last), 10_000);
  }, 120_000);
});
