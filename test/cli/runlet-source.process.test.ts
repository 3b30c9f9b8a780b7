import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultSource, installedFrom, runletFrom } from "../../src/cli/runlet-source.js";
import { REPO_ROOT } from "../support/run-cli.js";

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
    expect(await installedFrom(root)).toEqual({
      kind: "file",
      path: join(tmp, "vendor", "runlet-0.1.0.tgz"),
    });
  });

  it("falls back to the project's package-lock.json when node_modules has no lockfile", async () => {
    const root = await install("project-lock", { project: lock("file:runlet-0.1.0.tgz") });
    expect(await installedFrom(root)).toEqual({
      kind: "file",
      path: join(tmp, "project-lock", "runlet-0.1.0.tgz"),
    });
  });

  it("skips a damaged hidden lockfile and reads the project's", async () => {
    const root = await install("damaged", { hidden: "{ not json", project: lock("file:../r.tgz") });
    expect(await installedFrom(root)).toEqual({ kind: "file", path: join(tmp, "r.tgz") });
  });

  it("tells a registry install by its URL", async () => {
    const url = "https://example.test/runlet/-/runlet-0.1.0.tgz";
    const registry = await install("registry", { hidden: lock(url) });
    expect(await installedFrom(registry)).toEqual({ kind: "registry", url });
  });

  it("says nothing for a missing lockfile (a global install) or a copy outside node_modules", async () => {
    expect(await installedFrom(await install("no-lock", {}))).toBeUndefined();
    expect(await installedFrom(REPO_ROOT)).toBeUndefined();
  });
});

describe("runletFrom: the --runlet-from path", () => {
  it("accepts a tarball and a runlet folder, as absolute paths", async () => {
    await writeFile(join(tmp, "runlet-0.1.0.tgz"), "");
    expect(await runletFrom("runlet-0.1.0.tgz", tmp)).toEqual({
      kind: "tarball",
      path: join(tmp, "runlet-0.1.0.tgz"),
    });
    expect(await runletFrom(REPO_ROOT, tmp)).toEqual({ kind: "folder", path: REPO_ROOT.replace(/\/$/, "") });
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

describe("defaultSource: what init vendors without --runlet-from", () => {
  it("the tarball it was installed from while that file exists", async () => {
    await mkdir(join(tmp, "kept"), { recursive: true });
    await writeFile(join(tmp, "kept", "runlet-0.1.0.tgz"), "");
    const root = await install("kept/app", { hidden: lock("file:../runlet-0.1.0.tgz") });
    expect(await defaultSource(root)).toEqual({
      kind: "tarball",
      path: join(tmp, "kept", "runlet-0.1.0.tgz"),
    });
  });

  it("itself, packed, when that tarball is gone, when no lockfile says (a global install), or from a checkout", async () => {
    const moved = await install("moved", { hidden: lock("file:../gone/runlet-0.1.0.tgz") });
    expect(await defaultSource(moved)).toEqual({ kind: "folder", path: moved });
    const global = await install("global/lib", {});
    expect(await defaultSource(global)).toEqual({ kind: "folder", path: global });
    expect(await defaultSource(REPO_ROOT)).toEqual({ kind: "folder", path: REPO_ROOT });
  });

  it("the registry only when it was installed from one", async () => {
    const root = await install("from-registry", {
      hidden: lock("https://registry.example.test/runlet/-/runlet-0.1.0.tgz"),
    });
    expect(await defaultSource(root)).toEqual({ kind: "registry" });
  });
});
