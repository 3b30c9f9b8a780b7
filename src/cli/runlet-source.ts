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

/** Where npm's lockfile says this copy of runlet came from. */
export type InstalledOrigin =
  /** A `file:` tarball or folder (`npm install ./runlet-0.1.0.tgz`, `npx --package ./runlet-0.1.0.tgz`), absolute. */
  | { readonly kind: "file"; readonly path: string }
  /** A registry (the lockfile's `resolved` is a URL): the registry has been shown to hold this version. */
  | { readonly kind: "registry"; readonly url: string };

/**
 * Where this copy of runlet was installed from, read from the `resolved` field npm recorded for
 * it in the lockfile of the install that holds it. Undefined when no lockfile says: a global
 * install (npm keeps no lockfile there), a checkout run directly, a copy outside node_modules.
 */
export async function installedFrom(root: string = RUNLET_ROOT): Promise<InstalledOrigin | undefined> {
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
    if (typeof resolved !== "string") continue;
    if (resolved.startsWith("file:")) {
      return { kind: "file", path: resolve(installRoot, resolved.slice("file:".length)) };
    }
    if (/^https?:\/\//.test(resolved)) return { kind: "registry", url: resolved };
    return undefined;
  }
  return undefined;
}

/** What a new project's runlet dependency is made from. */
export type RunletSource =
  /** A tarball made by `npm pack`: copied into the project's vendor/. */
  | { readonly kind: "tarball"; readonly path: string }
  /** A runlet folder (a checkout, or an installed copy): packed with `npm pack` into vendor/. */
  | { readonly kind: "folder"; readonly path: string }
  /** The registry this runlet was installed from: a `^<version>` range. */
  | { readonly kind: "registry" };

async function kindOf(path: string): Promise<"tarball" | "folder" | undefined> {
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return undefined;
    throw err;
  });
  if (info === undefined) return undefined;
  return info.isDirectory() ? "folder" : "tarball";
}

/**
 * The source of a new project's runlet when `--runlet-from` is not given: the tarball or folder
 * this copy was installed from while it still exists; the registry when it came from one; else
 * this installed copy itself, packed (a global install, a checkout run directly, a tarball
 * since moved). Never a registry range for a version no registry has been shown to hold: the
 * name `runlet` on a registry may be someone else's package.
 */
export async function defaultSource(root: string = RUNLET_ROOT): Promise<RunletSource> {
  const origin = await installedFrom(root);
  if (origin?.kind === "registry") return { kind: "registry" };
  if (origin?.kind === "file") {
    const kind = await kindOf(origin.path);
    if (kind !== undefined) return { kind, path: origin.path };
  }
  return { kind: "folder", path: root };
}

/**
 * Checks a `--runlet-from` path (relative to `cwd`): a runlet folder (its package.json is named
 * `runlet`) or a tarball made by `npm pack`. Returns it as an absolute path; a usage error otherwise.
 */
export async function runletFrom(given: string, cwd: string = process.cwd()): Promise<RunletSource> {
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
  return { kind: info.isDirectory() ? "folder" : "tarball", path };
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
