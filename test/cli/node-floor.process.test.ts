import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { bundleHandler } from "../../src/cli/bundle.js";
import { belowNodeFloor, NODE_FLOOR } from "../../src/node-floor.js";
import { CLI, REPO_ROOT } from "../support/run-cli.js";

// Issue 43, item 1: Node 22.19 (undici 8's floor) is runlet's; package.json, the starters and the
// checks agree, and an older Node refuses to start with one line naming both versions.

const run = promisify(execFile);

/** The machine's own `node`s (PATH without npm's node_modules/.bin entries) older than the floor. */
async function oldNodes(): Promise<string[]> {
  const dirs = (process.env["PATH"] ?? "")
    .split(delimiter)
    .filter((d) => d !== "" && !d.includes("node_modules"));
  const found = new Set<string>();
  for (const dir of [...dirs, "/usr/local/bin", "/usr/bin"]) {
    const bin = join(dir, "node");
    try {
      const { stdout } = await run(bin, ["-p", "process.versions.node"]);
      if (belowNodeFloor(stdout.trim())) found.add(bin);
    } catch {
      // No node there.
    }
  }
  return [...found];
}

const old = await oldNodes();
const tmp: string[] = [];
afterAll(async () => {
  await Promise.all(tmp.map((d) => rm(d, { recursive: true, force: true })));
});

async function refusal(bin: string, args: readonly string[]): Promise<{ code: number; stderr: string }> {
  try {
    await run(bin, [...args], { env: { ...process.env, RUNPOD_WEBHOOK_GET_JOB: "" } });
    return { code: 0, stderr: "" };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

describe("the Node floor", () => {
  it("is package.json's engines and every starter's", async () => {
    const engines = async (path: string) =>
      (JSON.parse(await readFile(join(REPO_ROOT, path), "utf8")) as { engines: { node: string } }).engines
        .node;
    expect(await engines("package.json")).toBe(`>=${NODE_FLOOR}`);
    for (const template of ["basic", "batch", "ocr", "openai", "s3", "stream"]) {
      expect(await engines(`templates/${template}/package.json`), template).toBe(`>=${NODE_FLOOR}`);
    }
    const [major, minor] = NODE_FLOOR.split(".");
    expect(await readFile(join(REPO_ROOT, "Dockerfile.base"), "utf8")).toContain(
      `a < ${major} || (a === ${major} && b < ${minor})`,
    );
    expect(NODE_FLOOR).toBe(
      (
        JSON.parse(await readFile(join(REPO_ROOT, "node_modules/undici/package.json"), "utf8")) as {
          engines: { node: string };
        }
      ).engines.node.replace(/^>=/, ""),
    );
  });

  it("compares versions numerically", () => {
    expect(belowNodeFloor("20.20.2")).toBe(true);
    expect(belowNodeFloor("22.18.9")).toBe(true);
    expect(belowNodeFloor("v22.9.0")).toBe(true);
    expect(belowNodeFloor(NODE_FLOOR)).toBe(false);
    expect(belowNodeFloor("22.100.0")).toBe(false);
    expect(belowNodeFloor("24.0.0")).toBe(false);
    expect(belowNodeFloor(process.versions.node)).toBe(false);
  });

  it.skipIf(old.length === 0)(
    "refuses the runlet command on the machine's older Node, naming both versions (skips where this machine has no node older than the floor)",
    async () => {
      for (const bin of old) {
        const { stdout } = await run(bin, ["-p", "process.versions.node"]);
        const { code, stderr } = await refusal(bin, [CLI, "--help"]);
        expect(code).toBe(1);
        expect(stderr).toContain(`this is Node ${stdout.trim()}`);
        expect(stderr).toContain(`runlet needs Node ${NODE_FLOOR} or later`);
        expect(stderr).toContain("RUNLET_NODE_TOO_OLD");
        expect(stderr.trim().split("\n")).toHaveLength(1);
      }
    },
  );

  it.skipIf(old.length === 0)(
    "refuses a built bundle on the machine's older Node, and runs it on this one (skips where this machine has no node older than the floor)",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "runlet-floor-"));
      tmp.push(dir);
      const handler = join(dir, "handler.ts");
      await writeFile(
        handler,
        'import { defineHandler } from "runlet";\nexport default defineHandler({ handler: () => 1 });\n',
      );
      await bundleHandler({ handlerPath: handler, outDir: join(dir, "dist") });
      const bundle = join(dir, "dist", "worker.mjs");
      for (const bin of old) {
        const { code, stderr } = await refusal(bin, [bundle]);
        expect(code).toBe(1);
        expect(stderr).toContain(`runlet start: this is Node `);
        expect(stderr).toContain(`runlet needs Node ${NODE_FLOOR} or later`);
        expect(stderr.trim().split("\n")).toHaveLength(1);
      }
      // On this Node the check passes and the bundle goes on to say there is no platform.
      const here = await refusal(process.execPath, [bundle]);
      expect(here.stderr).not.toContain("RUNLET_NODE_TOO_OLD");
      expect(here.stderr).toContain("RUNLET_CLI_NO_PLATFORM");
    },
  );
});
