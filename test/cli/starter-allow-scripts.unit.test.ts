import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RUNLET_ROOT } from "../../src/cli/paths.js";

// Issue 54, item 7: npm 11 (11.16 on) ends every install with "install scripts not yet covered by
// allowScripts" for each dependency whose preinstall/install/postinstall it has not been told to
// run, and npm 12 skips them (esbuild's binary, onnxruntime-node's native library). A starter
// declares the ones it needs in package.json's `allowScripts`. Which dependencies have such
// scripts is read from the copies installed in runlet's own node_modules (esbuild,
// onnxruntime-node, node-llama-cpp); a dependency runlet does not install here is not judged.

const SCRIPTS = ["preinstall", "install", "postinstall"] as const;

/** The install scripts of `name` as installed in runlet's node_modules, or undefined when it is not installed here. */
function installScripts(name: string): string[] | undefined {
  const path = join(RUNLET_ROOT, "node_modules", name, "package.json");
  if (!existsSync(path)) return undefined;
  const scripts =
    (JSON.parse(readFileSync(path, "utf8")) as { scripts?: Record<string, string> }).scripts ?? {};
  return SCRIPTS.filter((s) => scripts[s] !== undefined);
}

const STARTERS = readdirSync(join(RUNLET_ROOT, "templates"), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);

describe("starters declare the install scripts npm 11 asks about (issue 54, item 7)", () => {
  it("covers every starter, the llm one (node-llama-cpp's postinstall) included", () => {
    expect(STARTERS).toContain("llm");
  });

  it.each(STARTERS)(
    "%s: every dependency with an install script is in allowScripts, and nothing else",
    (starter) => {
      const pkg = JSON.parse(
        readFileSync(join(RUNLET_ROOT, "templates", starter, "package.json"), "utf8"),
      ) as {
        dependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
        allowScripts?: Record<string, boolean>;
      };
      const deps = Object.keys({ ...pkg.dependencies, ...pkg.devDependencies });
      const needed = deps.filter((d) => (installScripts(d) ?? []).length > 0).sort();
      expect(needed).toContain("esbuild");
      expect(Object.keys(pkg.allowScripts ?? {}).sort()).toEqual(needed);
      for (const name of needed) expect(pkg.allowScripts?.[name]).toBe(true);
    },
  );
});
