import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** runlet's sources, where the walks start (entries are relative to it). */
export const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

/** A static `import ... from "x"`, `import "x"` or `export ... from "x"`; type-only ones are left out. */
const STATIC_IMPORT = /^\s*(?:import|export)\s+(?!type\b)(?:[^"';]*?\sfrom\s+)?["']([^"']+)["']/gm;

/** The specifiers a source file imports statically, in order (dynamic `import()` is not one). */
export function staticImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(STATIC_IMPORT)].map((m) => m[1]!);
}

/**
 * Walks the static, non-type imports from `entry` (relative to src/) through runlet's own files.
 * Returns every package (or `node:` module) reached, each with the chain of specifiers that
 * reaches it first, and every source file reached (relative to src/).
 */
export function walkImports(entry: string): { packages: Map<string, string[]>; files: Set<string> } {
  const seen = new Set<string>();
  const packages = new Map<string, string[]>();
  const visit = (file: string, chain: string[]): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of staticImports(file)) {
      if (spec.startsWith(".")) {
        visit(resolve(dirname(file), spec.replace(/\.js$/, ".ts")), [...chain, spec]);
      } else if (!packages.has(spec)) {
        packages.set(spec, [...chain, spec]);
      }
    }
  };
  visit(resolve(SRC, entry), [entry]);
  return { packages, files: new Set([...seen].map((f) => f.slice(SRC.length))) };
}

/** Every package a module reaches through static imports, with the chain that reaches it. */
export function packagesReached(entry: string): Map<string, string[]> {
  return walkImports(entry).packages;
}

/** Every source file (relative to src/) a module reaches through static imports, itself included. */
export function filesReached(entry: string): Set<string> {
  return walkImports(entry).files;
}
