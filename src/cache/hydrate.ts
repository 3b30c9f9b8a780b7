import { lstat, mkdir, realpath, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { settle } from "../task-sink.js";
import { loadTar, MAX_PACKED_BYTES, readArchive, type TarStream } from "./archive.js";
import type { CacheDir } from "./cache-options.js";
import { keyOf, newer } from "./local-files.js";
import { loadManifest, type Manifest, type ManifestEntry, safeJoin } from "./manifest.js";
import {
  copyExact,
  MissingFileError,
  openRegular,
  realDir,
  UnsafePathError,
  writeBufferAtomic,
} from "./safe-fs.js";

/**
 * Volume → container (docs/fitness.md, "Warm cache"): copies what is missing or newer on the
 * volume. No symbolic link on the volume or in a cached folder is followed; a file the volume no
 * longer holds (or holds changed) is left cold and the rest are restored; what would take the
 * container's disk below its threshold is left cold too; the caller's `signal` bounds the time.
 */

/** What one hydrate did so far (the caller reports it, also when it stops early). */
export interface HydrateTally {
  files: number;
  bytes: number;
  /** Entries that would leave their folder (`..`, a link on the way, not a regular file). */
  refused: number;
  /** Entries whose file the volume lacks or holds changed: left cold. */
  missing: number;
  /** Entries left cold because restoring them would take the disk below its threshold. */
  overBudget: number;
}

export interface HydrateContext {
  readonly volume: string;
  readonly namespace: string;
  readonly dirs: ReadonlyMap<string, CacheDir>;
  readonly parallelCopies: number;
  /** The free share of a cached folder's filesystem a hydrate leaves (the fitness `disk` threshold). */
  readonly minDiskPercent: number;
  /** The closing of the worker and the time bound, together. */
  readonly signal: AbortSignal;
}

interface Todo {
  readonly entry: ManifestEntry;
  readonly dir: CacheDir;
  settled: boolean;
}

/**
 * Runs `work` over `items`, `limit` at a time; stops starting new ones once `signal` aborts or
 * an item fails. Settles only when every started item has ended (a sync's lock is not released,
 * nor a hydrate's time bound cleared, while a copy still runs), with the first failure.
 */
export async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  signal: AbortSignal,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: { readonly err: unknown } | undefined;
  const lane = async () => {
    while (next < items.length && !signal.aborted && failure === undefined) {
      try {
        await work(items[next++] as T);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure.err;
  if (signal.aborted) throw signal.reason ?? new Error("aborted");
}

/** Each cached folder's real path (made when missing) and the bytes its filesystem may still take. */
class LocalFolders {
  readonly #real = new Map<string, string>();
  readonly #left = new Map<number, number>();
  readonly #devOf = new Map<string, number>();
  constructor(readonly minDiskPercent: number) {}

  async prepare(dir: CacheDir): Promise<void> {
    if (this.#real.has(dir.name)) return;
    await mkdir(dir.path, { recursive: true });
    const real = await realpath(dir.path);
    const { dev } = await stat(real);
    if (!this.#left.has(dev)) {
      const fs = await statfs(real);
      const keep = Math.ceil((fs.blocks * fs.bsize * this.minDiskPercent) / 100);
      this.#left.set(dev, Math.max(0, fs.bavail * fs.bsize - keep));
    }
    this.#real.set(dir.name, real);
    this.#devOf.set(dir.name, dev);
  }

  real(dir: CacheDir): string {
    return this.#real.get(dir.name) as string;
  }

  /** Reserves `bytes` on `dir`'s filesystem; false when that would go past its budget. */
  take(dir: CacheDir, bytes: number): boolean {
    const dev = this.#devOf.get(dir.name) as number;
    const left = this.#left.get(dev) as number;
    if (bytes > left) return false;
    this.#left.set(dev, left - bytes);
    return true;
  }
}

function isUnsafe(err: unknown): boolean {
  return err instanceof UnsafePathError;
}

/**
 * Hydrates into `tally`; "cold" when the volume holds no mirror or manifest yet. Throws on a
 * refused manifest, a container-side write error, or `signal`'s reason.
 */
export async function hydrateMirror(ctx: HydrateContext, tally: HydrateTally): Promise<"cold" | "hydrated"> {
  const { signal } = ctx;
  let realRoot: string;
  try {
    realRoot = await realDir(await realpath(ctx.volume), [".runlet-cache", ctx.namespace], false);
  } catch (err) {
    if (err instanceof MissingFileError) return "cold";
    throw err;
  }
  const locals = new LocalFolders(ctx.minDiskPercent);
  let tar: TarStream | undefined;
  /** Folders of a cached folder already checked (or made) in this hydrate, by path: each is checked once. */
  const checked = new Map<string, Promise<string>>();
  /** Whether a folder of a cached folder exists and is safe, without making it; each asked once per hydrate. */
  const probed = new Map<string, Promise<FolderState>>();
  const probe = (base: string, parts: readonly string[]) => {
    const key = join(base, ...parts);
    let state = probed.get(key);
    if (state === undefined) {
      state = realDir(base, parts, false).then(
        (): FolderState => "ok",
        (err: unknown): FolderState => {
          if (err instanceof MissingFileError) return "missing";
          if (err instanceof UnsafePathError) return "unsafe";
          throw err;
        },
      );
      probed.set(key, state);
    }
    return state;
  };
  const localFolder = (base: string, parts: readonly string[]) => {
    const key = join(base, ...parts);
    let folder = checked.get(key);
    if (folder === undefined) {
      folder = realDir(base, parts, true);
      checked.set(key, folder);
      // Ignored here: a refused folder stays refused for this hydrate, and each caller awaiting it
      // counts the entry under it.
      settle(folder, () => undefined);
    }
    return folder;
  };

  /** Writes `t`'s file through `write` into its folder, every folder on the way checked (none followed). */
  const place = async (t: Todo, write: (dest: string) => Promise<void>) => {
    const parts = t.entry.path.split("/");
    const name = parts.pop() as string;
    let dest: string;
    try {
      dest = join(await localFolder(locals.real(t.dir), parts), name);
    } catch (err) {
      if (!isUnsafe(err)) throw err;
      tally.refused += 1;
      return;
    }
    if ((await lstat(dest).catch(() => undefined))?.isDirectory()) {
      tally.refused += 1; // a folder stands where the file goes: left as it is
      return;
    }
    if (!locals.take(t.dir, t.entry.size)) {
      tally.overBudget += 1;
      return;
    }
    await write(dest);
    tally.files += 1;
    tally.bytes += t.entry.size;
  };

  for (let attempt = 1; ; attempt++) {
    const read = await loadManifestFor(realRoot);
    if (read === undefined) return tally.files > 0 ? "hydrated" : "cold";
    const todo = await wanted(read, ctx, tally, locals, probe);

    const packed = [...todo.values()].filter((t) => t.entry.packed);
    if (packed.length > 0 && read.archive !== null) {
      tar ??= await loadTar();
      try {
        await readArchive(
          tar,
          join(realRoot, read.archive),
          realRoot,
          (name, size) => {
            if (signal.aborted) throw signal.reason;
            const t = todo.get(name);
            if (t === undefined) {
              // A member the manifest does not list, or one that would leave its folder (../, /abs).
              if (safeJoin("/x", name) === undefined) tally.refused += 1;
              return false;
            }
            return t.entry.packed && !t.settled && t.entry.size === size && size <= MAX_PACKED_BYTES;
          },
          async (name, data) => {
            const t = todo.get(name) as Todo;
            t.settled = true;
            await place(t, (dest) => writeBufferAtomic(dest, data, t.entry.mtimeMs));
          },
        );
      } catch (err) {
        // A sync replaced the archive after this manifest was read: read the manifest again, once.
        if (err instanceof MissingFileError && attempt === 1) continue;
        if (!(err instanceof MissingFileError) && !isUnsafe(err)) throw err;
        if (isUnsafe(err)) tally.refused += 1;
      }
    }
    for (const t of packed) {
      if (!t.settled) tally.missing += 1;
      t.settled = true;
    }

    const big = [...todo.values()].filter((t) => !t.entry.packed);
    await eachLimited(big, ctx.parallelCopies, signal, async (t) => {
      const { entry } = t;
      const parts = ["big", entry.dir, ...entry.path.split("/")];
      const name = parts.pop() as string;
      let handle: import("node:fs/promises").FileHandle;
      try {
        handle = await openRegular(join(await realDir(realRoot, parts, false), name), realRoot);
      } catch (err) {
        if (err instanceof MissingFileError) tally.missing += 1;
        else if (isUnsafe(err)) tally.refused += 1;
        else throw err;
        return;
      }
      try {
        const blob = await handle.stat();
        // Another worker replaced the blob after this manifest was written: leave it cold rather than mislabel it.
        if (blob.size !== entry.size || newer(blob, entry) || newer(entry, blob)) {
          tally.missing += 1;
          return;
        }
        await place(t, (dest) => copyExact(handle, entry.size, dest, entry.mtimeMs, signal));
      } catch (err) {
        if (!(err instanceof MissingFileError)) throw err;
        tally.missing += 1;
      } finally {
        await handle.close().catch(() => undefined); // closing a read-only handle cannot lose data
      }
    });
    return "hydrated";
  }
}

/** The manifest, or undefined when absent; a refused one throws its reason. */
async function loadManifestFor(realRoot: string): Promise<Manifest | undefined> {
  const read = await loadManifest(realRoot);
  if (read.kind === "refused") throw new Error(read.reason);
  return read.kind === "read" ? read.manifest : undefined;
}

type FolderState = "ok" | "missing" | "unsafe";

/**
 * The manifest's entries this container lacks or holds older (newer wins). The way to each is
 * checked without following a link (`probe`); an entry whose way is unsafe is counted as refused.
 */
async function wanted(
  manifest: Manifest,
  ctx: HydrateContext,
  tally: HydrateTally,
  locals: LocalFolders,
  probe: (base: string, parts: readonly string[]) => Promise<FolderState>,
): Promise<Map<string, Todo>> {
  const todo = new Map<string, Todo>();
  for (const entry of manifest.files) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    const dir = ctx.dirs.get(entry.dir);
    if (dir === undefined) continue; // another handler version's folder: not this worker's
    if (safeJoin(dir.path, entry.path) === undefined) {
      tally.refused += 1;
      continue;
    }
    await locals.prepare(dir);
    const parts = entry.path.split("/");
    const name = parts.pop() as string;
    const state = await probe(locals.real(dir), parts);
    if (state === "unsafe") {
      tally.refused += 1;
      continue;
    }
    const local =
      state === "missing"
        ? undefined
        : await lstat(join(locals.real(dir), ...parts, name)).catch(() => undefined);
    const want =
      local === undefined ||
      !local.isFile() ||
      newer(entry, local) ||
      (!newer(local, entry) && local.size !== entry.size);
    if (want) todo.set(keyOf(entry), { entry, dir, settled: false });
  }
  return todo;
}
