import type { Dirent } from "node:fs";
import { copyFile, lstat, mkdir, readdir, readFile, readlink, realpath, symlink } from "node:fs/promises";
import { join, relative, resolve, sep } from "node:path";
import { RunletError } from "../errors.js";
import {
  type EntryManifest,
  type ExternalFileRules,
  PackagePruner,
  type PruneReason,
} from "./prune-externals.js";

/**
 * Copies one installed package folder (and the packages nested in its own node_modules) into
 * `dist/node_modules`, file by file, leaving out what {@link PackagePruner} drops. Nothing is
 * followed out of the package: a symbolic link whose target stays inside the package is copied as
 * a link (relative, so it stays inside in the copy too), a link that leaves it fails the build
 * naming the link (a link to a home folder would otherwise put its files into the image), and a
 * link that loops is copied as the link it is, never walked (docs/images.md, "What cannot be
 * bundled").
 */

/** What one package's copy wrote and left out. */
export interface PackageTally {
  /** Bytes of the files copied. */
  bytes: number;
  /** Bytes left out, by why. */
  readonly pruned: Map<PruneReason, number>;
}

/** Options of {@link copyPackage}. */
export interface CopyPackageOptions {
  /** The project's include and exclude lists. */
  readonly rules: ExternalFileRules;
  /** Leave out source maps, docs, tests and browser builds (other platforms' binaries go either way). @default true */
  readonly prune: boolean;
}

/** Deepest folder nesting walked inside one package (a bound; npm's deepest trees are far shallower). */
const MAX_DEPTH = 64;

async function readManifest(dir: string): Promise<EntryManifest> {
  try {
    return JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as EntryManifest;
  } catch {
    return {}; // No readable manifest: the default entry (index.js) is kept, the rest judged by name.
  }
}

/** Bytes under `path`, links not followed (a pruned folder may hold a link loop). */
async function treeBytes(path: string, depth = 0): Promise<number> {
  const info = await lstat(path);
  if (!info.isDirectory() || depth > MAX_DEPTH) return info.isFile() ? info.size : 0;
  let total = 0;
  for (const name of await readdir(path)) total += await treeBytes(join(path, name), depth + 1);
  return total;
}

function inside(root: string, path: string): boolean {
  return path === root || path.startsWith(root + sep);
}

/**
 * Copies the package at `srcDir` to `destDir`, pruned. `label` names the package in errors. Throws
 * RUNLET_BUILD_FAILED for a link that leaves the package.
 */
export async function copyPackage(
  srcDir: string,
  destDir: string,
  label: string,
  options: CopyPackageOptions,
): Promise<PackageTally> {
  // The package's own folder may itself be a link (npm link, workspaces): copy what it points at.
  const root = await realpath(srcDir);
  const tally: PackageTally = { bytes: 0, pruned: new Map() };
  const drop = async (reason: PruneReason, path: string) => {
    tally.pruned.set(reason, (tally.pruned.get(reason) ?? 0) + (await treeBytes(path)));
  };

  /** Copies a link that stays inside; one that leaves is refused, or, for npm's command links (`skipLeaving`), left behind. */
  const copyLink = async (path: string, dest: string, rel: string, skipLeaving = false) => {
    const text = await readlink(path);
    let target: string;
    try {
      target = await realpath(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ELOOP" && code !== "ENOENT") throw err;
      // A loop or a dangling link: nothing to follow. Where it would point decides, as written.
      target = resolve(path, "..", text);
    }
    if (!inside(root, target)) {
      if (skipLeaving) return;
      throw new RunletError(
        "RUNLET_BUILD_FAILED",
        `the external ${label} holds a symbolic link that leaves the package: ${label}/${rel} -> ${text}. ` +
          `runlet build copies links only when they stay inside their package (a link out of it would put files from elsewhere into the image). ` +
          `Remove the link, or leave it out with "runlet": {"externalFiles": {"exclude": ["${label}/${rel}"]}} in package.json`,
      );
    }
    await symlink(relative(resolve(path, ".."), target) || ".", dest);
  };

  const walk = async (dir: string, dest: string, pruner: PackagePruner, pkgRel: string, depth: number) => {
    if (depth > MAX_DEPTH) {
      throw new RunletError(
        "RUNLET_BUILD_FAILED",
        `the external ${label} nests folders more than ${MAX_DEPTH} deep (at ${relative(root, dir)}): not copied`,
      );
    }
    await mkdir(dest, { recursive: true });
    const entries: Dirent[] = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      const path = join(dir, e.name);
      const to = join(dest, e.name);
      const rel = pkgRel === "" ? e.name : `${pkgRel}/${e.name}`;
      const isDir = e.isDirectory();
      const reason = pruner.reason(rel, isDir);
      if (reason !== undefined) {
        await drop(reason, path);
        continue;
      }
      if (e.isSymbolicLink()) await copyLink(path, to, relative(root, path).split(sep).join("/"));
      else if (isDir && e.name === "node_modules") await walkModules(path, to, options, depth + 1);
      else if (isDir) await walk(path, to, pruner, rel, depth + 1);
      else if (e.isFile()) {
        await copyFile(path, to);
        tally.bytes += (await lstat(to)).size;
      }
      // Anything else (a socket, a FIFO) is no file a package loads: left behind.
    }
  };

  /** A package's own node_modules: each package in it is judged by its own manifest. */
  const walkModules = async (dir: string, dest: string, opts: CopyPackageOptions, depth: number) => {
    await mkdir(dest, { recursive: true });
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      const to = join(dest, e.name);
      if (e.isSymbolicLink()) {
        await copyLink(path, to, relative(root, path).split(sep).join("/"));
      } else if (e.isDirectory() && e.name === ".bin") {
        // npm's command links: no worker loads them; one pointing at a package elsewhere stays behind.
        await mkdir(to, { recursive: true });
        for (const bin of await readdir(path, { withFileTypes: true })) {
          const from = join(path, bin.name);
          if (bin.isSymbolicLink()) await copyLink(from, join(to, bin.name), relative(root, from), true);
          else if (bin.isFile()) {
            await copyFile(from, join(to, bin.name));
            tally.bytes += (await lstat(from)).size;
          }
        }
      } else if (e.isDirectory() && e.name.startsWith("@")) {
        await walkModules(path, to, opts, depth + 1);
      } else if (e.isDirectory()) {
        const m = await readManifest(path);
        await walk(path, to, await PackagePruner.create(path, m, opts.rules, opts.prune), "", depth + 1);
      } else if (e.isFile()) {
        await copyFile(path, to);
        tally.bytes += (await lstat(to)).size;
      }
    }
  };

  const pruner = await PackagePruner.create(root, await readManifest(root), options.rules, options.prune);
  await walk(root, destDir, pruner, "", 0);
  return tally;
}
