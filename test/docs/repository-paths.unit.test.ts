import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * docs/ ships in the npm package, and whoever installed the tarball has no `examples/`, `bench/`
 * or `test/` folder and no `npm run bench`. A page may still name them, but then it says they are
 * in runlet's repository: pages about the repository itself say so at the top; any other page says
 * so in the section that names them.
 */

const ROOT = resolve(import.meta.dirname, "../..");

/** Pages about the repository as a whole (layout, bench, fault-injection suite). */
const REPOSITORY_PAGES = new Set(["architecture.md", "benchmarks.md", "reliability.md"]);

/** Repository-only paths and commands. */
const REPOSITORY_ONLY = /examples\/|bench\/|(?<![\w./-])test\/|npm run [\w:-]+/g;

/** The same names where they mean a user's own project (what `runlet init` writes). */
const PROJECT_NAMES = new Set(["test/handler.test.ts", "npm run build"]);

function sections(markdown: string): string[] {
  return markdown.split(/\n(?=#{1,6} )/);
}

/** Each repository-only name in a section of `markdown` that does not say it is the repository's. */
function unmarkedRepositoryPaths(markdown: string): string[] {
  const found: string[] = [];
  for (const section of sections(markdown)) {
    if (section.includes("repository")) continue;
    for (const match of section.matchAll(REPOSITORY_ONLY)) {
      // A path runs on to its end (`test/handler.test.ts`); a command is its three words.
      const rest = match[0].startsWith("npm run ")
        ? match[0]
        : (section.slice(match.index).match(/^[^\s`'")]+/)?.[0] ?? match[0]);
      if (PROJECT_NAMES.has(rest)) continue;
      found.push(`${section.split("\n", 1)[0]}: ${rest}`);
    }
  }
  return found;
}

describe("repository-only paths in the shipped docs", () => {
  const pages = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md"));

  it("are named only where the page says they are in runlet's repository", () => {
    const unmarked: string[] = [];
    for (const page of pages.filter((p) => !REPOSITORY_PAGES.has(p))) {
      const text = readFileSync(join(ROOT, "docs", page), "utf8");
      for (const hit of unmarkedRepositoryPaths(text)) unmarked.push(`docs/${page}: ${hit}`);
    }
    expect(unmarked).toEqual([]);
  });

  it("pages about the repository say so in their first paragraphs", () => {
    for (const page of REPOSITORY_PAGES) {
      const top = readFileSync(join(ROOT, "docs", page), "utf8")
        .split("\n")
        .slice(0, 12)
        .join("\n");
      expect(top, `docs/${page}`).toContain("runlet's repository");
    }
  });

  it("the check flags a command with no word of the repository, and passes one that has it", () => {
    expect(unmarkedRepositoryPaths("# Speed\n\n`npm run bench` measures it.\n")).toEqual([
      "# Speed: npm run bench",
    ]);
    expect(
      unmarkedRepositoryPaths("# Speed\n\nIn runlet's repository, `npm run bench` measures it.\n"),
    ).toEqual([]);
    expect(unmarkedRepositoryPaths("# Files\n\n`src/handler.ts`, `test/handler.test.ts`\n")).toEqual([]);
  });
});
