import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * What test files share lives in test/support/ (helpers) or test/fixtures/ (handlers, workers and
 * files the tests load): a file in one test folder imports nothing from another test folder (nor
 * from a file loose in test/). A helper used only inside its own folder may stay there. Every
 * relative import counts: static, type-only, re-exports and dynamic `import()`, and so does a file
 * named by `new URL(..., import.meta.url)` (a handler a worker loads); an import whose target does
 * not exist (a sample inside a string) is not an edge.
 */

const TEST = fileURLToPath(new URL("../", import.meta.url));
const SHARED = new Set(["support", "fixtures"]);
const SOURCE = /\.(?:ts|mts|mjs|js)$/;

/** Every relative import of a source text. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']/gm))
    found.push(m[1]!);
  for (const m of text.matchAll(/^\s*import\s+["']([^"']+)["']/gm)) found.push(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) found.push(m[1]!);
  // A file loaded by path (a handler for a worker, a child's entry) is a dependency too.
  for (const m of text.matchAll(/\bnew URL\(\s*["']([^"']+)["']\s*,\s*import\.meta\.url/g)) found.push(m[1]!);
  return found.filter((spec) => spec.startsWith("."));
}

/** The file an import names (a folder is none): `x.js` may be `x.ts` on disk (and `x.mjs`, `x.mts`). */
function target(from: string, spec: string): string | undefined {
  const path = resolve(dirname(from), spec);
  const candidates = [path, path.replace(/\.js$/, ".ts"), path.replace(/\.mjs$/, ".mts")];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

/** The top folder of a path under the test root; "" for a file loose in it. */
function folderOf(root: string, file: string): string {
  const parts = relative(root, file).split(sep);
  return parts.length > 1 ? parts[0]! : "";
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && SOURCE.test(e.name) && !e.parentPath.includes("node_modules"))
    .map((e) => join(e.parentPath, e.name));
}

/** Each import, as `from -> to` (relative to root), that reaches into another test folder. */
function crossFolderImports(root: string): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(root)) {
    const from = folderOf(root, file);
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      const to = target(file, spec);
      if (to === undefined || relative(root, to).startsWith("..")) continue;
      const folder = folderOf(root, to);
      if (folder !== from && !SHARED.has(folder))
        found.push(`${relative(root, file)} -> ${relative(root, to)}`);
    }
  }
  return found.sort();
}

describe("test helpers", () => {
  it("are shared through test/support/ and test/fixtures/ only", () => {
    expect(crossFolderImports(TEST)).toEqual([]);
  });

  it("the check finds an import into another test folder (so it can fail)", () => {
    const root = mkdtempSync(join(tmpdir(), "runlet-test-imports-"));
    try {
      const put = (path: string, text: string): void => {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      };
      put("worker/helpers.ts", "export const x = 1;\n");
      put("support/wait.ts", "export const w = 1;\n");
      put("fixtures/echo.ts", "export const e = 1;\n");
      put("loose.ts", "export const l = 1;\n");
      put("worker/handler.ts", "export default 1;\n");
      put("worker/a.test.ts", 'import { x } from "./helpers.js";\nimport { w } from "../support/wait.js";\n');
      put(
        "hostile/b.test.ts",
        [
          'import {\n  x,\n} from "../worker/helpers.js";',
          'import { e } from "../fixtures/echo.js";',
          'const m = await import("../loose.js");',
          'const h = new URL("../worker/handler.ts", import.meta.url);',
          "const s = 'import { y } from \"../nowhere/y.js\";';",
        ].join("\n"),
      );
      expect(crossFolderImports(root)).toEqual([
        `hostile${sep}b.test.ts -> loose.ts`,
        `hostile${sep}b.test.ts -> worker${sep}handler.ts`,
        `hostile${sep}b.test.ts -> worker${sep}helpers.ts`,
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
