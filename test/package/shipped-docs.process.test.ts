import { existsSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packStaged } from "../../scripts/pack-staged.mjs";
import { MARK, packageReadme } from "../../scripts/package-readme.mjs";
import { brokenLinks } from "../support/markdown-links.js";
import { REPO_ROOT } from "../support/run-cli.js";
import { npm, run } from "./npm-run.js";

/**
 * The docs as the people who install runlet get them: the package's README (package-readme.md,
 * which npm pack puts in README.md's place) and every shipped docs/ page link only to files the
 * package holds, and to headings those files have. The tarball is the one `npm pack` makes, packed
 * from a copy (scripts/pack-staged.mjs), so a page that links to something "files" leaves out
 * fails here. The swap that a plain `npm pack` relies on runs through npm's prepack and postpack
 * on a small package, to show that the tarball gets the package's README and the checkout keeps
 * its own, also after a pack that stopped half-way.
 */

let packed: Map<string, string | undefined>;
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-shipped-docs-"));
  // The tarball `npm pack` makes (npm's own file list, the package's README), packed from a copy so
  // the checkout's README.md never changes under the tests that read it.
  const { tarball, packed: description } = packStaged(tmp);
  const unpacked = join(tmp, "unpacked");
  await mkdir(unpacked);
  const untar = await run("tar", ["-xzf", tarball, "-C", unpacked], tmp);
  expect(untar.code, untar.stderr).toBe(0);
  packed = new Map();
  for (const { path } of description.files) {
    const text = path.endsWith(".md") ? await readFile(join(unpacked, "package", path), "utf8") : undefined;
    packed.set(path, text);
  }
}, 120_000);

afterAll(async () => {
  if (tmp !== undefined) await rm(tmp, { recursive: true, force: true });
});

describe("the docs that ship in the package", () => {
  it("link only to files the package holds and headings those pages have", () => {
    const pages = [...packed.keys()].filter((f) => f === "README.md" || /^docs\/[^/]+\.md$/.test(f));
    expect(pages).toContain("docs/protocol.md");
    expect(pages).toContain("docs/cli.md");
    expect(brokenLinks(packed, pages)).toEqual([]);
  });

  it("cite only headings the package's README has when they name README.md", () => {
    const readme = packed.get("README.md") ?? "";
    const headings = readme
      .split("\n")
      .filter((l) => /^#{1,6}\s/.test(l))
      .map((l) => l.replace(/^#+\s*/, "").replace(/[`*]/g, ""));
    const cited: string[] = [];
    for (const [path, text] of packed) {
      for (const m of (text ?? "").matchAll(/README\.md,\s+"([^"\n]+)"/g)) cited.push(`${path}: ${m[1]}`);
    }
    // docs/cli.md sends readers to the README's "Install": a check that finds nothing must fail.
    expect(cited).toContain("docs/cli.md: Install");
    const missing = cited.filter((c) => {
      const name = c.slice(c.indexOf(": ") + 2);
      return !headings.some((h) => h === name || h.startsWith(`${name}:`) || h.startsWith(`${name} (`));
    });
    expect(missing).toEqual([]);
  });

  it("the package's README is for users: no repository-only commands, paths or links", () => {
    const readme = packed.get("README.md") ?? "";
    expect(readme).toBe(packageReadme(REPO_ROOT));
    for (const command of ["npm install && npm run dev", "npm run test:image", "npm run bench"]) {
      expect(readme).not.toContain(command);
    }
    for (const path of ["examples/", "bench/", "test/reliability"]) {
      expect(readme, path).not.toMatch(new RegExp(`\\(${path}|\`${path}`));
    }
    // ...and says how to install, start, develop, test, build and deploy.
    for (const step of [
      "runlet-0.1.0.tgz",
      "runlet init",
      "runlet dev",
      "npm test",
      "runlet build",
      "runlet deploy",
    ]) {
      expect(readme, step).toContain(step);
    }
  });

  it("the check finds a missing file, a link out of the package and a missing heading", () => {
    const files = new Map<string, string | undefined>([
      ["README.md", "[a](docs/a.md#two) [b](docs/b.md) [c](../x.md) ![d](docs/) [e](https://x.y)\n"],
      ["docs/a.md", "# One\n\n## Two\n\n[up](../README.md) [self](#one) [gone](#three)\n"],
    ]);
    expect(brokenLinks(files, ["README.md", "docs/a.md"])).toEqual([
      "README.md:1: docs/b.md is not in the package",
      "README.md:1: ../x.md leaves the package",
      "docs/a.md:5: #three: docs/a.md has no heading with that anchor",
    ]);
  });
});

describe("npm pack's README swap (scripts/package-readme.mjs)", () => {
  const script = join(REPO_ROOT, "scripts", "package-readme.mjs");
  const repoReadme = "# the repository's README\n\nnpm install && npm run dev\n";
  const packageText = "# the package's README\n";

  /** A package whose prepack and postpack run the swap, as runlet's package.json does. */
  async function makePackage(dir: string): Promise<void> {
    await mkdir(join(dir, "docs"), { recursive: true });
    await writeFile(
      join(dir, "package.json"),
      JSON.stringify({
        name: "swap-check",
        version: "1.0.0",
        files: ["docs"],
        scripts: {
          prepack: `node ${JSON.stringify(script)} swap`,
          postpack: `node ${JSON.stringify(script)} restore`,
        },
      }),
    );
    await writeFile(join(dir, "README.md"), repoReadme);
    await writeFile(join(dir, "package-readme.md"), packageText);
    await writeFile(join(dir, "docs", "a.md"), "# A\n");
  }

  it("packs package-readme.md as README.md and leaves the checkout's README.md as it was", async () => {
    const dir = join(tmp, "swap");
    await makePackage(dir);
    const pack = await npm(["pack", "--json"], dir);
    expect(pack.code, pack.stderr).toBe(0);
    const [{ filename, files }] = JSON.parse(pack.stdout) as [
      { filename: string; files: { path: string }[] },
    ];
    expect(files.map((f) => f.path).sort()).toEqual(["README.md", "docs/a.md", "package.json"]);
    const listed = await run("tar", ["-xzOf", filename, "package/README.md"], dir);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toBe(`${MARK}\n\n${packageText}`);
    expect(await readFile(join(dir, "README.md"), "utf8")).toBe(repoReadme);
    expect(existsSync(join(dir, ".tmp", "pack", "README.md"))).toBe(false);
  }, 120_000);

  it("after a pack that stopped before postpack, the next pack puts the checkout's README back first", async () => {
    const dir = join(tmp, "interrupted");
    await makePackage(dir);
    // A prepack without its postpack: the package's README is in place, the repository's saved.
    const swapOnly = await npm(["run", "prepack"], dir);
    expect(swapOnly.code, swapOnly.stderr).toBe(0);
    expect((await readFile(join(dir, "README.md"), "utf8")).startsWith(MARK)).toBe(true);
    // The next full pack still ships the package's README and restores the repository's.
    const pack = await npm(["pack", "--json"], dir);
    expect(pack.code, pack.stderr).toBe(0);
    expect(await readFile(join(dir, "README.md"), "utf8")).toBe(repoReadme);
    // A lost backup is refused, not taken for the repository's README.
    await npm(["run", "prepack"], dir);
    await rm(join(dir, ".tmp"), { recursive: true, force: true });
    const lost = await npm(["run", "postpack"], dir);
    expect(lost.code).not.toBe(0);
    expect(lost.stderr).toContain("git checkout README.md");
  }, 120_000);

  it("this checkout's README.md is the contributors' (a swap was never left in it)", async () => {
    const readme = await readFile(join(REPO_ROOT, "README.md"), "utf8");
    expect(readme.startsWith(MARK)).toBe(false);
    expect(readme).toContain("npm install && npm run dev");
    expect(statSync(join(REPO_ROOT, "package-readme.md")).isFile()).toBe(true);
  });
});
