import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shippedManifest } from "../../scripts/pack-manifest.mjs";
import { REPO_ROOT } from "../support/run-cli.js";
import { NPM_CLI, run } from "./npm-run.js";

// The package.json npm pack ships comes from the real prepack and postpack hooks, run here on a
// small package (runlet's own tarball is packed from a copy in the other package tests, so the
// checkout's package.json never changes under tests that read it).

const script = join(REPO_ROOT, "scripts", "pack-manifest.mjs");

/** A package whose prepack and postpack strip and restore its package.json, as runlet's do. */
function manifest(): string {
  return `${JSON.stringify(
    {
      name: "manifest-check",
      version: "1.0.0",
      files: ["index.js"],
      scripts: {
        prepare: "node scripts/build.mjs --if-stale",
        prepack: `node ${JSON.stringify(script)} strip`,
        postpack: `node ${JSON.stringify(script)} restore`,
      },
      dependencies: { zod: "^4.0.0" },
      devDependencies: { vitest: "^4.0.0" },
      overrides: { rollup: "4.0.0" },
    },
    null,
    2,
  )}\n`;
}

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-pack-manifest-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("the package.json npm pack ships (scripts/pack-manifest.mjs)", () => {
  it("has no scripts, devDependencies or overrides, and the checkout keeps its own", async () => {
    const dir = join(tmp, "pack");
    await mkdir(dir);
    await writeFile(join(dir, "package.json"), manifest());
    await writeFile(join(dir, "index.js"), "export {};\n");
    // --ignore-scripts would skip the hooks under test; prepare's build.mjs does not exist here,
    // and the stripped manifest no longer names it by the time npm would run it.
    const pack = await run(process.execPath, [NPM_CLI, "pack", "--json"], dir);
    expect(pack.code, pack.stderr).toBe(0);
    const [{ filename }] = JSON.parse(pack.stdout) as [{ filename: string }];
    const shipped = await run("tar", ["-xzOf", filename, "package/package.json"], dir);
    expect(JSON.parse(shipped.stdout)).toEqual({
      name: "manifest-check",
      version: "1.0.0",
      files: ["index.js"],
      dependencies: { zod: "^4.0.0" },
    });
    expect(await readFile(join(dir, "package.json"), "utf8")).toBe(manifest());
    expect(existsSync(join(dir, ".tmp", "pack", "package.json"))).toBe(false);
  }, 120_000);

  it("after a strip without its restore, the next strip puts the checkout's back first", async () => {
    const dir = join(tmp, "interrupted");
    await mkdir(dir);
    await writeFile(join(dir, "package.json"), manifest());
    const first = await run(process.execPath, [script, "strip", "--root", dir], dir);
    expect(first.code, first.stderr).toBe(0);
    expect(await readFile(join(dir, "package.json"), "utf8")).toBe(shippedManifest(manifest()));
    const second = await run(process.execPath, [script, "strip", "--root", dir], dir);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain("an earlier pack stopped before postpack; package.json restored first");
    const restore = await run(process.execPath, [script, "restore", "--root", dir], dir);
    expect(restore.code, restore.stderr).toBe(0);
    expect(await readFile(join(dir, "package.json"), "utf8")).toBe(manifest());
  });
});
