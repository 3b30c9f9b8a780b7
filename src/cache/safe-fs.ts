import { randomUUID } from "node:crypto";
import { constants, createReadStream, createWriteStream } from "node:fs";
import { type FileHandle, lstat, mkdir, open, realpath, rename, rm, utimes } from "node:fs/promises";
import { join, sep } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";

/**
 * File access for the warm cache that follows no symbolic link below a trusted base (docs/fitness.md,
 * "Warm cache", "Nothing leaves its folder"): the configured folders and the volume's mount are
 * taken as they resolve; every folder under them is checked with `lstat` before it is entered or
 * created in, files are opened with `O_NOFOLLOW`, and written under a fresh temporary name opened
 * with `O_EXCL` (which no planted link can redirect), then renamed.
 */

/** Suffix of every file being written; a reader never opens one, a sync removes old ones. */
export const TEMP_SUFFIX = ".runlet-tmp";

/** A path on the way that is a symbolic link or not a folder: the entry is refused, nothing is created. */
export class UnsafePathError extends Error {
  constructor(
    readonly path: string,
    what: string,
  ) {
    super(`${path} is ${what}; refused (the warm cache follows no symbolic link)`);
  }
}

/** A file the manifest names that is not on the volume (or no longer matches): left cold. */
export class MissingFileError extends Error {}

/** `O_NOFOLLOW` where the platform has it; `O_NONBLOCK` so a planted FIFO cannot hang the open. */
const READ_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** True when `path` is `base` or below it. */
function inside(base: string, path: string): boolean {
  return path === base || path.startsWith(base.endsWith(sep) ? base : base + sep);
}

/**
 * The folder `base/parts…`, every step checked with `lstat`: a symbolic link or a non-folder on the
 * way throws {@link UnsafePathError} before anything below it is created. With `create`, missing
 * folders are made one at a time (each checked again, as another writer may race); without it a
 * missing one throws {@link MissingFileError}. `base` itself is trusted (resolve it first).
 */
export async function realDir(base: string, parts: readonly string[], create: boolean): Promise<string> {
  let path = base;
  for (const part of parts) {
    path = join(path, part);
    let st = await lstat(path).catch((err: unknown) => {
      if (code(err) === "ENOENT") return undefined;
      throw err;
    });
    if (st === undefined) {
      if (!create) throw new MissingFileError(`${path} is missing`);
      await mkdir(path).catch((err: unknown) => {
        // Another writer made it meanwhile: checked just below like any existing folder.
        if (code(err) !== "EEXIST") throw err;
      });
      st = await lstat(path);
    }
    if (st.isSymbolicLink()) throw new UnsafePathError(path, "a symbolic link");
    if (!st.isDirectory()) throw new UnsafePathError(path, "not a folder");
  }
  return path;
}

/**
 * Opens the regular file at `path` for reading without following a link at its end; on Linux the
 * opened file's real path must also lie under `realBase` (a folder on the way swapped for a link
 * after it was checked is caught here). Throws {@link MissingFileError} when absent,
 * {@link UnsafePathError} when a link, not a regular file, or outside.
 */
export async function openRegular(path: string, realBase: string): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(path, READ_FLAGS);
  } catch (err) {
    if (code(err) === "ENOENT") throw new MissingFileError(`${path} is missing`);
    if (code(err) === "ELOOP") throw new UnsafePathError(path, "a symbolic link");
    throw err;
  }
  try {
    if (!(await handle.stat()).isFile()) throw new UnsafePathError(path, "not a regular file");
    if (process.platform === "linux") {
      const real = await realpath(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
      if (real !== undefined && !inside(realBase, real))
        throw new UnsafePathError(path, `outside ${realBase} (at ${real})`);
    }
    return handle;
  } catch (err) {
    await handle.close().catch(() => undefined); // the error above is the one to report
    throw err;
  }
}

/** Bytes per read of a copy: large files are model weights, read in 1 MiB steps. */
const CHUNK = 1_048_576;

/** A fresh temporary name beside `dest`. */
export function tempName(dest: string): string {
  return `${dest}.${randomUUID().slice(0, 8)}${TEMP_SUFFIX}`;
}

/**
 * Writes `dest` from `fill` (given a write stream of a fresh temporary file opened with `O_EXCL`),
 * sets its time to `mtimeMs`, and renames it over `dest`; the temporary file is removed on failure.
 */
export async function writeAtomic(
  dest: string,
  mtimeMs: number,
  fill: (out: NodeJS.WritableStream & { bytesWritten: number }) => Promise<void>,
): Promise<void> {
  const tmp = tempName(dest);
  try {
    const out = createWriteStream(tmp, { flags: "wx", highWaterMark: CHUNK });
    await fill(out);
    await utimes(tmp, new Date(), new Date(mtimeMs));
    await rename(tmp, dest);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined); // best effort; the error above is the one to report
    throw err;
  }
}

/** Writes `data` to `dest` as {@link writeAtomic} does, in one write (a packed file, below `smallFileBytes`). */
export async function writeBufferAtomic(dest: string, data: Buffer, mtimeMs: number): Promise<void> {
  const tmp = tempName(dest);
  try {
    const handle = await open(tmp, "wx");
    try {
      await handle.writeFile(data);
    } finally {
      await handle.close();
    }
    await utimes(tmp, new Date(), new Date(mtimeMs));
    await rename(tmp, dest);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined); // best effort; the error above is the one to report
    throw err;
  }
}

/**
 * Copies exactly `size` bytes of the open `source` to `dest` (through {@link writeAtomic}): a
 * source that is shorter now throws {@link MissingFileError}, one that grew is cut at `size`.
 * A sparse source is written dense, so its `size` is what the caller bounds.
 */
export async function copyExact(
  source: FileHandle,
  size: number,
  dest: string,
  mtimeMs: number,
  signal: AbortSignal,
): Promise<void> {
  await writeAtomic(dest, mtimeMs, async (out) => {
    const input =
      size === 0
        ? Readable.from([])
        : createReadStream("", {
            fd: source,
            start: 0,
            end: size - 1,
            autoClose: false,
            highWaterMark: CHUNK,
          });
    await pipeline(input, out, { signal });
    if (out.bytesWritten !== size)
      throw new MissingFileError(`${dest}: its source has ${out.bytesWritten} bytes, not ${size}`);
  });
}
