import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { brokenLinks } from "../support/markdown-links.js";

/**
 * Every relative link of the repository's Markdown (both READMEs, docs/, the examples' and the
 * starters' READMEs) names a file or folder of the repository and, with `#...`, a heading the
 * linked page has. The package's own pages are checked against the tarball in
 * test/package/shipped-docs.process.test.ts.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const SKIP = new Set(["node_modules", "dist", ".tmp", ".git"]);

function walk(dir: string, out: Map<string, string | undefined>): void {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const path = dir === "." ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) walk(path, out);
    else out.set(path, path.endsWith(".md") ? readFileSync(join(ROOT, path), "utf8") : undefined);
  }
}

describe("links in the repository's Markdown", () => {
  it("resolve to files and headings of the repository", () => {
    const files = new Map<string, string | undefined>();
    walk(".", files);
    const pages = [...files.keys()].filter(
      (f) =>
        /^(README|package-readme)\.md$/.test(f) || /^(docs|examples|templates\/[^/]+)\/[^/]+\.md$/.test(f),
    );
    expect(pages).toEqual(expect.arrayContaining(["README.md", "docs/protocol.md", "examples/README.md"]));
    expect(brokenLinks(files, pages)).toEqual([]);
  });
});
