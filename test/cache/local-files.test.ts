import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { scanLocal } from "../../src/cache/local-files.js";

// The container side of a warm-cache sync: what scanLocal finds on a real disk, and its bound.

const folders: string[] = [];
afterEach(async () => {
  for (const dir of folders.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function tree(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "runlet-scan-"));
  folders.push(dir);
  return dir;
}

describe("scanLocal", () => {
  it("finds regular files, leaving out links, temporary files and lock files", async () => {
    const root = await tree();
    await mkdir(join(root, "a", "b"), { recursive: true });
    await writeFile(join(root, "a", "b", "model.bin"), "weights");
    await writeFile(join(root, "top.txt"), "t");
    await writeFile(join(root, "x.lock"), "");
    await symlink(join(root, "top.txt"), join(root, "link.txt"));
    const scan = await scanLocal([{ path: root, name: "models" }]);
    expect(scan.truncated).toBe(false);
    expect(scan.files.map((f) => f.path).sort()).toEqual(["a/b/model.bin", "top.txt"]);
  });

  // On main only files were counted: a tree of empty folders was walked to its end, however big.
  it("counts folders against its limit: a tree of empty folders stops there, saying why", async () => {
    const root = await tree();
    for (let i = 0; i < 30; i++) await mkdir(join(root, `d${i}`, "e", "f"), { recursive: true });
    const scan = await scanLocal([{ path: root, name: "models" }], 20);
    expect(scan.files).toEqual([]);
    expect(scan.truncated).toBe(true);
    expect(scan.truncated && scan.reason).toBe(
      'more than 20 files and folders under the cached folders (stopped in "models")',
    );
  });

  it("counts files against the same limit, and is not truncated at exactly the limit", async () => {
    const root = await tree();
    await mkdir(join(root, "sub"));
    for (let i = 0; i < 9; i++) await writeFile(join(root, "sub", `f${i}`), "x");
    // 10 entries: the folder and its 9 files.
    const exact = await scanLocal([{ path: root, name: "models" }], 10);
    expect(exact.truncated).toBe(false);
    expect(exact.files).toHaveLength(9);
    const over = await scanLocal([{ path: root, name: "models" }], 5);
    expect(over.truncated).toBe(true);
    expect(over.files.length).toBeLessThanOrEqual(4);
  });
});
