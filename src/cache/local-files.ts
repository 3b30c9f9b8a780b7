import type { Dir } from "node:fs";
import { lstat, opendir } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import type { CacheDir } from "./cache-options.js";
import { MAX_FILES, TEMP_SUFFIX } from "./manifest.js";

/** One regular file in a cached folder. */
export interface LocalFile {
  /** The folder's mirror name. */
  readonly dir: string;
  /** Its path inside the folder, `/`-separated. */
  readonly path: string;
  readonly abs: string;
  readonly size: number;
  readonly mtimeMs: number;
}

export { MAX_FILES } from "./manifest.js";
/** A download still being written (or cut short by a kill): never mirrored, never a finished file. */
export const PARTIAL_SUFFIX = ".partial";
/** mtimes within this many ms are equal: network filesystems keep coarse times (the Python SDK's 2 s). */
export const MTIME_TOLERANCE_MS = 2_000;

/** True when `a` is newer than `b` by more than the tolerance. */
export function newer(a: { mtimeMs: number }, b: { mtimeMs: number }): boolean {
  return a.mtimeMs > b.mtimeMs + MTIME_TOLERANCE_MS;
}

/** The key of a file across the container and the volume. */
export function keyOf(f: { dir: string; path: string }): string {
  return `${f.dir}/${f.path}`;
}

/** What {@link scanLocal} found; `truncated` names the limit when it stopped early. */
export type LocalScan =
  | { readonly files: LocalFile[]; readonly truncated: false }
  | { readonly files: LocalFile[]; readonly truncated: true; readonly reason: string };

/**
 * Every regular file under the folders (symbolic links, temporary, `.partial` and lock files left out).
 * Every entry looked at (file, folder, link or other) counts against `limit` ({@link MAX_FILES}):
 * a tree of millions of empty folders is not walked to its end. At the limit the scan stops and
 * `truncated` says so, with the reason; the rest wait for a later sync. Folders are read an entry
 * at a time, so one folder holding millions of entries is not listed whole either.
 */
export async function scanLocal(dirs: readonly CacheDir[], limit = MAX_FILES): Promise<LocalScan> {
  const files: LocalFile[] = [];
  let seen = 0;
  for (const dir of dirs) {
    const stack = [dir.path];
    while (stack.length > 0) {
      const folder = stack.pop() as string;
      let handle: Dir;
      try {
        handle = await opendir(folder);
      } catch {
        // The folder does not exist yet (nothing cached) or vanished meanwhile: nothing to send from it.
        continue;
      }
      try {
        for await (const e of handle) {
          if (seen >= limit) {
            return {
              files,
              truncated: true,
              reason: `more than ${limit} files and folders under the cached folders (stopped in "${dir.name}")`,
            };
          }
          seen++;
          const abs = join(folder, e.name);
          if (e.isDirectory()) stack.push(abs);
          if (
            !e.isFile() ||
            e.name.endsWith(TEMP_SUFFIX) ||
            e.name.endsWith(".lock") ||
            e.name.endsWith(PARTIAL_SUFFIX)
          )
            continue;
          const st = await lstat(abs).catch(() => undefined);
          if (st === undefined || !st.isFile()) continue;
          files.push({
            dir: dir.name,
            path: relative(dir.path, abs).split(sep).join("/"),
            abs,
            size: st.size,
            mtimeMs: st.mtimeMs,
          });
        }
      } catch {
        // The folder vanished while it was read: what was read of it stands.
      } finally {
        // A for-await that ran to its end or returned early closed it already.
        await handle.close().catch(() => undefined);
      }
    }
  }
  return { files, truncated: false };
}
