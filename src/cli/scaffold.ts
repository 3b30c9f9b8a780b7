import { copyFile, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { extname, join } from "node:path";
import { VERSION } from "../version.js";

/** Files whose text gets `{{placeholder}}` substitution; everything else is copied byte for byte. */
const TEXT_EXTENSIONS = new Set([".json", ".md", ".ts", ".mts", ".js", ".mjs", ".txt", ""]);

/**
 * Names npm would drop or rename when publishing runlet (so the templates store them under
 * another name) mapped to the name they get in the new project.
 */
const RENAMES: Readonly<Record<string, string>> = {
  _gitignore: ".gitignore",
  _dockerignore: ".dockerignore",
  _npmrc: ".npmrc",
};

/** Values substituted into a starter. */
export interface ScaffoldValues {
  /** The npm package name of the new project. */
  readonly name: string;
  /** The project's `runlet` dependency spec: a version range or a `file:` path. @default `^<this version>` */
  readonly runletDependency?: string;
}

/**
 * Turns a folder name into a valid npm package name: lower case, only `a-z0-9-._~`, not starting
 * with `.` or `_`. Falls back to `runlet-worker` when nothing usable is left.
 */
export function packageNameFor(folderName: string): string {
  const cleaned = folderName
    .toLowerCase()
    .replace(/[^a-z0-9\-._~]+/g, "-")
    .replace(/^[._-]+/, "")
    .replace(/-+$/, "")
    .slice(0, 214);
  return cleaned === "" ? "runlet-worker" : cleaned;
}

function substitute(text: string, values: Record<string, string>): string {
  return text.replace(/\{\{(\w+)\}\}/g, (whole, key: string) => values[key] ?? whole);
}

/**
 * Copies the starter at `templateDir` into `targetDir` (which must exist), filling in the
 * placeholders. Returns the relative paths written, sorted.
 */
export async function copyTemplate(
  templateDir: string,
  targetDir: string,
  values: ScaffoldValues,
): Promise<string[]> {
  const substitutions = { name: values.name, runletDependency: values.runletDependency ?? `^${VERSION}` };
  const written: string[] = [];
  async function walk(from: string, to: string, rel: string): Promise<void> {
    for (const entry of await readdir(from, { withFileTypes: true })) {
      const targetName = RENAMES[entry.name] ?? entry.name;
      const source = join(from, entry.name);
      const target = join(to, targetName);
      const relTarget = rel === "" ? targetName : `${rel}/${targetName}`;
      if (entry.isDirectory()) {
        await mkdir(target, { recursive: true });
        await walk(source, target, relTarget);
      } else if (TEXT_EXTENSIONS.has(extname(entry.name))) {
        await writeFile(target, substitute(await readFile(source, "utf8"), substitutions));
        written.push(relTarget);
      } else {
        await copyFile(source, target);
        written.push(relTarget);
      }
    }
  }
  await walk(templateDir, targetDir, "");
  return written.sort();
}
