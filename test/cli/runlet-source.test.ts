import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileSpec, installedFrom, runletFrom } from "../../src/cli/runlet-source.js";
import { REPO_ROOT } from "./run-cli.js";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-source-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** An install folder holding node_modules/runlet, with the given lockfiles (text, as npm writes them). */
async function install(name: string, lockfiles: { hidden?: string; project?: string }): Promise<string> {
  const root = join(tmp, name, "node_modules", "runlet");
  await mkdir(root, { recursive: true });
  if (lockfiles.hidden !== undefined) {
    await writeFile(join(tmp, name, "node_modules", ".package-lock.json"), lockfiles.hidden);
  }
  if (lockfiles.project !== undefined)
    await writeFile(join(tmp, name, "package-lock.json"), lockfiles.project);
  return root;
}

function lock(resolved: string): string {
  return JSON.stringify({
    lockfileVersion: 3,
    packages: { "node_modules/runlet": { version: "0.1.0", resolved } },
  });
}

describe("installedFrom: where npm says this runlet came from", () => {
  it("reads a tarball's path from node_modules/.package-lock.json, relative to the install", async () => {
    const root = await install("tarball", { hidden: lock("file:../vendor/runlet-0.1.0.tgz") });
    expect(await installedFrom(root)).toBe(join(tmp, "vendor", "runlet-0.1.0.tgz"));
  });

  it("falls back to the project's package-lock.json when node_modules has no lockfile", async () => {
    const root = await install("project-lock", { project: lock("file:runlet-0.1.0.tgz") });
    expect(await installedFrom(root)).toBe(join(tmp, "project-lock", "runlet-0.1.0.tgz"));
  });

  it("skips a damaged hidden lockfile and reads the project's", async () => {
    const root = await install("damaged", { hidden: "{ not json", project: lock("file:../r.tgz") });
    expect(await installedFrom(root)).toBe(join(tmp, "r.tgz"));
  });

  it("says nothing for a registry install, a missing lockfile, or a copy outside node_modules", async () => {
    const registry = await install("registry", {
      hidden: lock("https://example.test/runlet/-/runlet-0.1.0.tgz"),
    });
    expect(await installedFrom(registry)).toBeUndefined();
    expect(await installedFrom(await install("no-lock", {}))).toBeUndefined();
    expect(await installedFrom(REPO_ROOT)).toBeUndefined();
  });
});

describe("runletFrom: the --runlet-from path", () => {
  it("accepts a tarball and a runlet folder, as absolute paths", async () => {
    await writeFile(join(tmp, "runlet-0.1.0.tgz"), "");
    expect(await runletFrom("runlet-0.1.0.tgz", tmp)).toBe(join(tmp, "runlet-0.1.0.tgz"));
    expect(await runletFrom(REPO_ROOT, tmp)).toBe(REPO_ROOT.replace(/\/$/, ""));
  });

  it("refuses a missing path, a folder that is not runlet, and a file that is not a tarball", async () => {
    await mkdir(join(tmp, "other"), { recursive: true });
    await writeFile(join(tmp, "other", "package.json"), JSON.stringify({ name: "other" }));
    await writeFile(join(tmp, "notes.txt"), "");
    await expect(runletFrom("nope.tgz", tmp)).rejects.toThrow(
      "--runlet-from nope.tgz: no such file or folder",
    );
    await expect(runletFrom("other", tmp)).rejects.toThrow(
      '--runlet-from other: not a runlet folder (its package.json must be named "runlet")',
    );
    await expect(runletFrom("notes.txt", tmp)).rejects.toThrow(
      "--runlet-from notes.txt: expected a runlet folder or a .tgz tarball made by npm pack",
    );
  });
});

describe("fileSpec", () => {
  it("writes the path relative to the project, with forward slashes", () => {
    expect(fileSpec("/a/vendor/runlet-0.1.0.tgz", "/a/projects/w")).toBe(
      "file:../../vendor/runlet-0.1.0.tgz",
    );
    expect(fileSpec("/a/w/runlet.tgz", "/a/w")).toBe("file:runlet.tgz");
  });
});
