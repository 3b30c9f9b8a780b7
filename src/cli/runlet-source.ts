import { readFile, stat } from "node:fs/promises";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { usageError } from "./command.js";
import { RUNLET_ROOT } from "./paths.js";

/** What npm writes into a lockfile's `packages` entries that matters here. */
interface LockedPackage {
  readonly resolved?: unknown;
}

/** Parses a lockfile's text; undefined when it is not JSON with a `packages` object. */
function lockedPackages(text: string): Record<string, LockedPackage | undefined> | undefined {
  try {
    const lock = JSON.parse(text) as { packages?: unknown };
    return typeof lock.packages === "object" && lock.packages !== null
      ? (lock.packages as Record<string, LockedPackage | undefined>)
      : undefined;
  } catch {
    // A damaged lockfile only means we cannot tell where runlet came from; init then uses the registry.
    return undefined;
  }
}

/**
 * The tarball or folder this copy of runlet was installed from (`npm install ./runlet-0.1.0.tgz`,
 * `npx --package ./runlet-0.1.0.tgz runlet ...`), as an absolute path: read from the `resolved`
 * field npm recorded for it in the lockfile of the install that holds it. Undefined for a registry
 * install, a checkout run directly, or when no lockfile says.
 */
export async function installedFrom(root: string = RUNLET_ROOT): Promise<string | undefined> {
  const nodeModules = dirname(root);
  if (basename(nodeModules) !== "node_modules") return undefined;
  const installRoot = dirname(nodeModules);
  const key = relative(installRoot, root).split(sep).join("/");
  // npm keeps a copy of the lockfile inside node_modules; a project's own lockfile says the same.
  for (const lockfile of [join(nodeModules, ".package-lock.json"), join(installRoot, "package-lock.json")]) {
    const text = await readFile(lockfile, "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    const resolved = text === undefined ? undefined : lockedPackages(text)?.[key]?.resolved;
    if (typeof resolved === "string") {
      return resolved.startsWith("file:") ? resolve(installRoot, resolved.slice("file:".length)) : undefined;
    }
  }
  return undefined;
}

/**
 * Checks a `--runlet-from` path (relative to `cwd`): a runlet folder (its package.json is named
 * `runlet`) or a tarball made by `npm pack`. Returns it as an absolute path; a usage error otherwise.
 */
export async function runletFrom(given: string, cwd: string = process.cwd()): Promise<string> {
  const path = resolve(cwd, given);
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return undefined;
    throw err;
  });
  if (info === undefined) throw usageError(`--runlet-from ${given}: no such file or folder`);
  if (info.isDirectory()) {
    const manifest = await readFile(join(path, "package.json"), "utf8").catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return undefined;
        throw err;
      },
    );
    if (manifest === undefined || manifestName(manifest) !== "runlet") {
      throw usageError(
        `--runlet-from ${given}: not a runlet folder (its package.json must be named "runlet")`,
      );
    }
  } else if (!/\.(tgz|tar\.gz)$/.test(path)) {
    throw usageError(`--runlet-from ${given}: expected a runlet folder or a .tgz tarball made by npm pack`);
  }
  return path;
}

/** A package.json's `name`; undefined when the text is not JSON. */
function manifestName(manifest: string): unknown {
  try {
    return (JSON.parse(manifest) as { name?: unknown }).name;
  } catch {
    // Not JSON: not a runlet folder, which the caller reports.
    return undefined;
  }
}

/** The `file:` dependency spec of `target` for a package.json in `projectDir`: relative, with `/`. */
export function fileSpec(target: string, projectDir: string): string {
  const rel = relative(projectDir, target).split(sep).join("/");
  return `file:${rel === "" ? "." : rel}`;
}
