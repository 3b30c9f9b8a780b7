import { lstat, readdir } from "node:fs/promises";
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

/**
 * Every regular file under the folders (symbolic links, temporary files and lock files left out),
 * at most {@link MAX_FILES}; `truncated` says whether some were left for later.
 */
export async function scanLocal(
  dirs: readonly CacheDir[],
): Promise<{ files: LocalFile[]; truncated: boolean }> {
  const files: LocalFile[] = [];
  for (const dir of dirs) {
    const stack = [dir.path];
    while (stack.length > 0) {
      const folder = stack.pop() as string;
      let entries: import("node:fs").Dirent[];
      try {
        entries = await readdir(folder, { withFileTypes: true });
      } catch {
        // The folder does not exist yet (nothing cached) or vanished meanwhile: nothing to send from it.
        continue;
      }
      for (const e of entries) {
        const abs = join(folder, e.name);
        if (e.isDirectory()) stack.push(abs);
        if (!e.isFile() || e.name.endsWith(TEMP_SUFFIX) || e.name.endsWith(".lock")) continue;
        const st = await lstat(abs).catch(() => undefined);
        if (st === undefined || !st.isFile()) continue;
        if (files.length >= MAX_FILES) return { files, truncated: true };
        files.push({
          dir: dir.name,
          path: relative(dir.path, abs).split(sep).join("/"),
          abs,
          size: st.size,
          mtimeMs: st.mtimeMs,
        });
      }
    }
  }
  return { files, truncated: false };
}
