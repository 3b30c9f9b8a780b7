import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderProjectDockerfile, WORKER_NODE_FLAGS } from "../../src/cli/dockerfile.js";
import { startHarness } from "../../src/harness/index.js";
import { childEnv, REPO_ROOT, runCli, runNode } from "../support/run-cli.js";
import { node22 } from "./node22.js";

let tmp: string;
let node: { bin: string; version: string; fallback: boolean };

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-build-"));
  node = await node22();
}, 200_000);
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** Builds `handler` in a fresh project folder and returns that folder. */
async function buildIn(
  name: string,
  handler: string,
  extra: string[] = [],
): Promise<{ dir: string; stdout: string }> {
  const dir = join(tmp, name);
  const { mkdir } = await import("node:fs/promises");
  await mkdir(dir);
  // The verify step has its own tests (build-verify.process.test.ts); these run their bundles themselves.
  const r = await runCli(["build", join(REPO_ROOT, handler), "--no-verify", ...extra], { cwd: dir });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return { dir, stdout: r.stdout };
}

/** The JavaScript files of a dist/ folder, relative to it, sorted. */
async function jsFiles(dist: string): Promise<string[]> {
  const entries = await readdir(dist, { recursive: true });
  return entries.filter((f) => f.endsWith(".mjs")).sort();
}

/** The source files a bundle file's source map names. */
async function mapSources(file: string): Promise<string[]> {
  return (JSON.parse(await readFile(`${file}.map`, "utf8")) as { sources: string[] }).sources;
}

/**
 * Runs the bundle alone (dist/ copied into an empty folder, as the image's final stage does: no
 * node_modules, no sources) with Node 22 and the image command's Node flags against a harness, sends it `jobs`, and returns their
 * snapshots; stops the worker with SIGTERM.
 */
async function runBundle(bundleDir: string, jobs: unknown[]) {
  const lonely = await mkdtemp(join(tmp, "image-"));
  await cp(join(bundleDir, "dist"), lonely, { recursive: true });
  expect((await readdir(lonely)).sort()).toEqual([
    "chunks",
    "heartbeat-thread.mjs",
    "worker.mjs",
    "worker.mjs.map",
  ]);
  await using harness = await startHarness({ takeTimeoutMs: 500, endpoints: [{ id: "bundle" }] });
  const child = spawn(node.bin, [...WORKER_NODE_FLAGS, join(lonely, "worker.mjs")], {
    cwd: lonely,
    env: { ...childEnv(), ...harness.workerEnv("bundle"), RUNPOD_ENDPOINT_ID: "bundle", NODE_PATH: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout.on("data", (d: Buffer) => {
    log += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    log += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  try {
    const ids = jobs.map((input) => harness.enqueue("bundle", { input }));
    const results = [];
    for (const id of ids) results.push(await harness.waitForJob(id, { timeoutMs: 30_000 }));
    child.kill("SIGTERM");
    return { results, exitCode: await exited, log };
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}

describe("runlet build", () => {
  it("bundles a thread-isolated handler that runs from its dist folder alone under Node 22", async () => {
    const { dir, stdout } = await buildIn("cpu", "examples/cpu-thread/handler.ts");
    expect(stdout).toMatch(
      /^Built dist\/worker\.mjs {2}\d+(\.\d+)? (KiB|MiB) loaded at start, \d+(\.\d+)? (KiB|MiB) on demand {2}\(source maps \d+(\.\d+)? (KiB|MiB)\)\n/,
    );
    expect(stdout).toContain("Wrote Dockerfile");
    expect(await readFile(join(dir, "Dockerfile"), "utf8")).toBe(renderProjectDockerfile());
    const bundle = await readFile(join(dir, "dist", "worker.mjs"), "utf8");
    expect(bundle.startsWith('import { createRequire as __runletCreateRequire } from "node:module";')).toBe(
      true,
    );
    expect(bundle).toContain("//# sourceMappingURL=worker.mjs.map");
    const withMaps = (await jsFiles(join(dir, "dist"))).filter((f) =>
      existsSync(join(dir, "dist", `${f}.map`)),
    );
    const sources = (await Promise.all(withMaps.map((f) => mapSources(join(dir, "dist", f))))).flat();
    expect(sources.some((s) => s.endsWith("examples/cpu-thread/handler.ts"))).toBe(true);

    const { results, exitCode, log } = await runBundle(dir, [
      { below: 100 },
      { below: 1000 },
      { below: "x" },
    ]);
    if (node.fallback) console.warn("this run used the current Node, not Node 22");
    expect(results.map((j) => [j.status, j.output])).toEqual([
      ["COMPLETED", { below: 100, primes: 25 }],
      ["COMPLETED", { below: 1000, primes: 168 }],
      ["FAILED", undefined],
    ]);
    expect(results[2]?.error).toContain("below");
    expect(exitCode, log).toBe(0);
  });

  it("ends a bundle started without the platform's environment with exit 2 and one message", async () => {
    const { dir } = await buildIn("local", "examples/echo/handler.ts");
    const r = await runNode([join(dir, "dist", "worker.mjs")], { node: node.bin, cwd: dir, env: childEnv() });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      "runlet start: RUNPOD_WEBHOOK_GET_JOB is not set, so there is no platform to take jobs from, and neither PORT nor RUNLET_MODE asks for a load-balancing server; this serves the platform inside its container. Locally, run `runlet dev <handler>` (a local platform plus workers) or `runlet test <handler> --input '{...}'` (one job) (RUNLET_CLI_NO_PLATFORM)\n",
    );
  });

  it("keeps the source maps of the entry and of the files with the project's code only", async () => {
    const { dir } = await buildIn("maps", "examples/echo/handler.ts");
    const dist = join(dir, "dist");
    const files = await readdir(dist, { recursive: true });
    const maps = files.filter((f) => f.endsWith(".map")).sort();
    expect(maps.length).toBe(2);
    expect(maps).toContain("worker.mjs.map");
    const handlerMap = maps.find((m) => m !== "worker.mjs.map") as string;
    expect(await mapSources(join(dist, handlerMap.replace(/\.map$/, "")))).toEqual([
      expect.stringMatching(/examples\/echo\/handler\.ts$/),
    ]);
    // Every other chunk names no map, so Node has nothing to parse for it.
    for (const f of (await jsFiles(dist)).filter((j) => !maps.includes(`${j}.map`))) {
      expect(await readFile(join(dist, f), "utf8")).not.toContain("sourceMappingURL");
    }
    expect((await jsFiles(dist)).length).toBeGreaterThan(maps.length);
  });

  it("fills Node 22's compile cache with --warm-compile-cache and exits 0 without taking jobs", async () => {
    const { dir } = await buildIn("warm", "examples/echo/handler.ts");
    const cache = join(dir, "compile-cache");
    // No platform variables: a plain start would exit 2 (the case above); the flag loads and exits.
    const r = await runNode([join(dir, "dist", "worker.mjs"), "--warm-compile-cache"], {
      node: node.bin,
      cwd: dir,
      env: childEnv({ NODE_COMPILE_CACHE: cache }),
    });
    expect([r.code, r.stdout, r.stderr]).toEqual([0, "", ""]);
    if (node.fallback) {
      console.warn("no Node 22 here: the compile cache itself is not checked");
      return;
    }
    // Node keeps one folder per Node version, holding one entry per compiled module.
    const entries = await readdir(cache, { recursive: true });
    expect(entries.filter((e) => e.includes("/")).length).toBeGreaterThan(0);
  });

  it("loads none of Node's modules that a start does not need (each is compiled anew under the image's flags)", async () => {
    // docs/benchmarks.md, "Cold start": under the image's V8 flags Node compiles each of its own
    // modules from source at every start. --warm-compile-cache loads what a start loads up front
    // (the bundle's static modules and the handler); a preload lists Node's modules at its exit
    // (written with writeSync: process.stderr, a pipe here, would load node:net itself).
    const { dir } = await buildIn("builtins", "examples/echo/handler.ts");
    const listAtExit = `data:text/javascript,${encodeURIComponent(
      'process.on("exit",()=>process.getBuiltinModule("node:fs").writeSync(2,process.moduleLoadList.filter((m)=>m.startsWith("NativeModule ")).map((m)=>m.slice(13)).join("\\n")))',
    )}`;
    const r = await runNode(
      [
        ...WORKER_NODE_FLAGS,
        `--import=${listAtExit}`,
        join(dir, "dist", "worker.mjs"),
        "--warm-compile-cache",
      ],
      { node: node.bin, cwd: dir, env: childEnv() },
    );
    expect(r.code).toBe(0);
    const loaded = r.stderr.split("\n");
    expect(loaded).toContain("worker_threads"); // The list is Node's modules (so the check below can fail).
    // node:fs/promises and node:readline come with a static ESM import of node:fs (Node builds its
    // namespace), node:perf_hooks with the first touch of `performance`; the rest with optional parts.
    // (node:net is not listed: a worker's log lines go to stdout, a pipe on the platform.)
    const unneeded = [
      "fs/promises",
      "internal/fs/promises",
      "internal/readline/interface",
      "perf_hooks",
      "crypto",
      "child_process",
      "zlib",
      "http",
      "https",
    ];
    expect(loaded.filter((m) => unneeded.includes(m))).toEqual([]);
  });

  it("never runs setup with --warm-compile-cache (the image build), and runs it on a real start", async () => {
    const { mkdir, writeFile } = await import("node:fs/promises");
    const dir = join(tmp, "warm-setup");
    await mkdir(dir);
    await writeFile(join(dir, "package.json"), '{"type": "module"}\n');
    await writeFile(
      join(dir, "handler.ts"),
      [
        'import { writeFileSync } from "node:fs";',
        'import { defineHandler } from "runlet";',
        "export default defineHandler({",
        "  setup: () => {",
        '    const marker = process.env["SETUP_MARKER"];',
        '    if (marker !== undefined) writeFileSync(marker, "setup ran");',
        '    return { loaded: "set up" };',
        "  },",
        "  handler: ({ state }) => state.loaded,",
        "});",
        "",
      ].join("\n"),
    );
    expect((await runCli(["build", "--no-verify"], { cwd: dir })).code).toBe(0);
    const marker = join(dir, "setup-ran");
    const r = await runNode([join(dir, "dist", "worker.mjs"), "--warm-compile-cache"], {
      node: node.bin,
      cwd: dir,
      env: childEnv({ SETUP_MARKER: marker }),
    });
    expect([r.code, r.stdout, r.stderr]).toEqual([0, "", ""]);
    expect(existsSync(marker)).toBe(false);
    // The same bundle started as a worker runs setup before its first job.
    const { results } = await runBundle(dir, [{}]);
    expect(results.map((job) => job.output)).toEqual(["set up"]);
  });

  it("ends a bundle whose handler module exports no definition with exit 1 and one line", async () => {
    const { mkdir, writeFile } = await import("node:fs/promises");
    const dir = join(tmp, "no-definition");
    await mkdir(dir);
    await writeFile(join(dir, "package.json"), '{"type": "module"}\n');
    await writeFile(join(dir, "handler.ts"), "export default { handler: () => 1 };\n");
    expect((await runCli(["build", "--no-verify"], { cwd: dir })).code).toBe(0);
    const r = await runNode([join(dir, "dist", "worker.mjs")], { node: node.bin, cwd: dir, env: childEnv() });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      "runlet start: handler.ts must `export default defineHandler({...})` (RUNLET_HANDLER_LOAD)\n",
    );
  });

  it("keeps an existing Dockerfile that copies dist/ whole, and copies an --external package into dist/node_modules", async () => {
    const { dir } = await buildIn("ext", "examples/token-stream/handler.ts");
    const again = await runCli(
      ["build", join(REPO_ROOT, "examples/token-stream/handler.ts"), "--external", "zod", "--no-verify"],
      {
        cwd: dir,
      },
    );
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/\nexternal: zod {2}--external {2}\+[\d.]+ [KM]iB\n/);
    expect(again.stdout).toMatch(/\nCopied 1 package into dist\/node_modules {2}\d/);
    expect(await readFile(join(dir, "Dockerfile"), "utf8")).toBe(renderProjectDockerfile());
    const texts = await Promise.all(
      (await jsFiles(join(dir, "dist")))
        .filter((f) => !f.startsWith("node_modules"))
        .map((f) => readFile(join(dir, "dist", f), "utf8")),
    );
    expect(texts.filter((t) => /from\s*"zod"/.test(t)).length).toBeGreaterThan(0);
    expect(existsSync(join(dir, "dist", "node_modules", "zod", "package.json"))).toBe(true);
  });

  it("loads the S3 SDK only on demand and never bundles pino-pretty", async () => {
    const { dir } = await buildIn("lazy", "examples/echo/handler.ts", ["--all-source-maps"]);
    const dist = join(dir, "dist");
    // What the entry imports statically is what a start loads (besides the handler's chunk).
    const entry = await readFile(join(dist, "worker.mjs"), "utf8");
    const staticChunks = [...entry.matchAll(/import\s*(?:[^"']*?from\s*)?"\.\/(chunks\/[^"]+)"/g)].map(
      (m) => m[1],
    );
    expect(staticChunks.length).toBeGreaterThan(0);
    const eagerSources = (
      await Promise.all(["worker.mjs", ...(staticChunks as string[])].map((f) => mapSources(join(dist, f))))
    ).flat();
    const allSources = (
      await Promise.all((await jsFiles(dist)).map((f) => mapSources(join(dist, f))))
    ).flat();
    const pkg = (name: string) => (s: string) => s.includes(`node_modules/${name}/`);
    // The walk sees runlet's worker (a walk that found nothing could not fail).
    expect(eagerSources.some((s) => s.includes("src/worker/"))).toBe(true);
    expect(eagerSources.filter(pkg("@aws-sdk/client-s3"))).toEqual([]);
    expect(allSources.some(pkg("@aws-sdk/client-s3"))).toBe(true);
    expect(allSources.filter(pkg("pino-pretty"))).toEqual([]);
  });

  it("fails with exit 1 and esbuild's location when the handler does not compile", async () => {
    const { mkdir, writeFile } = await import("node:fs/promises");
    const dir = join(tmp, "broken");
    await mkdir(dir);
    await writeFile(
      join(dir, "handler.ts"),
      'import { nothing } from "./missing.js";\nexport default nothing;\n',
    );
    const r = await runCli(["build"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^runlet build: esbuild could not bundle the handler:\n.*handler\.ts:1:\d+: Could not resolve "\.\/missing\.js" \(RUNLET_BUILD_FAILED\)\n$/,
    );
    expect(r.stdout).toBe("");
    // Nothing is left behind: no empty dist/ to mistake for a build.
    expect(existsSync(join(dir, "dist"))).toBe(false);
  });
});
