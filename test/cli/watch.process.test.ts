import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { watchFolder } from "../../src/cli/watch.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "runlet-watch-"));
  for (const sub of ["lib/deep", "node_modules/pkg", "dist", ".git"])
    await mkdir(join(dir, sub), { recursive: true });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Collects reported files until `expected` have all been seen; resolves with everything reported. */
function collectUntil(expected: readonly string[]): { seen: Promise<string[]>; close(): void } {
  const all = new Set<string>();
  let close = () => {};
  const seen = new Promise<string[]>((resolve) => {
    const w = watchFolder(
      dir,
      (files) => {
        for (const f of files) all.add(f);
        if (expected.every((f) => all.has(f))) resolve([...all].sort());
      },
      100,
    );
    close = () => w.close();
  });
  return { seen, close: () => close() };
}

describe("watchFolder (runlet dev's reload trigger)", () => {
  it("reports source changes in the folder and its sub-folders, never node_modules, dist or dot folders", async () => {
    const { seen, close } = collectUntil(["handler.ts", "lib/deep/util.ts"]);
    try {
      // Ignored writes first: had they been seen, they would be reported before the others.
      await writeFile(join(dir, "node_modules/pkg/index.js"), "x");
      await writeFile(join(dir, "dist/worker.mjs"), "x");
      await writeFile(join(dir, ".git/HEAD"), "x");
      await writeFile(join(dir, "handler.ts"), "x");
      await writeFile(join(dir, "lib/deep/util.ts"), "x");
      expect(await seen).toEqual(["handler.ts", "lib/deep/util.ts"]);
    } finally {
      close();
    }
  });

  it("never names an editor's temporary files: vim's 4913 and .swp, emacs's #autosave#, JetBrains' ___jb_tmp___, kate's swap, ~ backups (issue 54, item 7)", async () => {
    const { seen, close } = collectUntil(["handler.ts"]);
    try {
      const temporary = [
        "4913",
        "handler.ts.swp",
        "handler.ts.swo",
        "#handler.ts#",
        "handler.ts___jb_tmp___",
        "handler.ts___jb_old___",
        "handler.ts.kate-swp",
        "handler.ts.crswap",
        "handler.ts.tmp",
        "handler.ts~",
        "lib/deep/util.ts.swp",
      ];
      for (const name of temporary) await writeFile(join(dir, name), "x");
      await writeFile(join(dir, "handler.ts"), "x");
      expect(await seen).toEqual(["handler.ts"]);
    } finally {
      close();
    }
  });
});
