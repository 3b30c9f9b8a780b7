import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Where this copy of runlet lives. The CLI bundles and scaffolds from its own copy (templates,
 * Dockerfile.base, the worker entry), so a project always gets the runlet that ran the command.
 */
export const RUNLET_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The folder of starters `runlet init` copies from. */
export const TEMPLATES_DIR = join(RUNLET_ROOT, "templates");

/** The names of the starters in templates/, in the order `runlet init --help` lists them. */
export const TEMPLATE_NAMES = ["basic", "stream", "s3", "openai", "batch", "ocr", "onnx", "llm"] as const;

/** A starter's name. */
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

interface PackageJson {
  readonly exports: Record<string, string | { readonly import: string }>;
}

let cachedExports: ReadonlyMap<string, string> | undefined;

/**
 * Maps each import specifier runlet publishes (`runlet`, `runlet/testing`, …) to the absolute
 * path of its built file in dist/, read from runlet's own package.json `exports`.
 */
export function runletExports(): ReadonlyMap<string, string> {
  if (cachedExports !== undefined) return cachedExports;
  const pkg = JSON.parse(readFileSync(join(RUNLET_ROOT, "package.json"), "utf8")) as PackageJson;
  const map = new Map<string, string>();
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const file = typeof target === "string" ? target : target.import;
    map.set(subpath === "." ? "runlet" : `runlet/${subpath.slice(2)}`, join(RUNLET_ROOT, file));
  }
  cachedExports = map;
  return map;
}
