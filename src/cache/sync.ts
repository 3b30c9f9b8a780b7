import { randomUUID } from "node:crypto";
import type { FileHandle } from "node:fs/promises";
import { lstat, readdir, realpath, rm, utimes } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { loadTar, MAX_PACKED_BYTES, readArchive, writeArchive } from "./archive.js";
import type { CacheDir } from "./cache-options.js";
import { eachLimited } from "./hydrate.js";
import { keyOf, type LocalFile, newer, scanLocal } from "./local-files.js";
import {
  loadManifest,
  MANIFEST_VERSION,
  MAX_FILES,
  type Manifest,
  type ManifestEntry,
  safeJoin,
  writeManifest,
} from "./manifest.js";
import {
  copyExact,
  MissingFileError,
  openRegular,
  realDir,
  TEMP_SUFFIX,
  UnsafePathError,
} from "./safe-fs.js";
import { acquireSyncLock } from "./sync-lock.js";

/**
 * Container → volume (docs/fitness.md, "Warm cache"): sends what is missing or newer in the
 * container, under the mirror's sync lock, so two workers' syncs run one after the other and the
 * second starts from the first's manifest. No symbolic link on the volume or in a cached folder is
 * followed; an entry whose way passes one is counted as refused and the rest go on.
 */

/** Archives no manifest names and temporary files older than this are removed by a sync. */
export const STALE_MS = 10 * 60_000;

export interface SyncContext {
  readonly volume: string;
  readonly namespace: string;
  readonly dirs: readonly CacheDir[];
  readonly dirByName: ReadonlyMap<string, CacheDir>;
  readonly smallFileBytes: number;
  readonly parallelCopies: number;
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** What one sync did so far. */
export interface SyncTally {
  files: number;
  bytes: number;
  /** Files whose way on the volume or in the container passes a symbolic link or a non-folder. */
  refused: number;
}

/** The mirror's manifest, read under the lock; a refused one is logged and rewritten. */
async function baseManifest(root: string, log: Logger) {
  const read = await loadManifest(root);
  if (read.kind === "refused") {
    log.warn(
      { cache: "sync", reason: read.reason },
      `warm cache sync: ${read.reason}; this sync writes a new one`,
    );
  }
  return read;
}

export async function syncMirror(ctx: SyncContext, tally: SyncTally): Promise<"synced" | "unchanged"> {
  const root = await realDir(await realpath(ctx.volume), [".runlet-cache", ctx.namespace], true);
  const lock = await acquireSyncLock(root, ctx.signal);
  try {
    await realDir(root, ["big"], true).catch((err: unknown) => {
      // A link or a file as big/: each large file below is refused on its own (counted), the small ones go on.
      if (!(err instanceof UnsafePathError)) throw err;
    });
    const read = await baseManifest(root, ctx.log);
    const old = read.kind === "read" ? read.manifest : undefined;
    const scan = await scanLocal(ctx.dirs);
    const local = scan.files;
    if (scan.truncated) ctx.log.warn(`warm cache: ${scan.reason}; the rest wait for a later sync`);
    const kept = new Map<string, ManifestEntry>();
    // Entries of folders this worker does not cache (another handler version's) are kept as they are.
    for (const e of old?.files ?? []) {
      const dir = ctx.dirByName.get(e.dir);
      const usable =
        dir !== undefined ? safeJoin(dir.path, e.path) !== undefined : safeJoin("/", `${e.dir}/${e.path}`);
      if (usable) kept.set(keyOf(e), e);
    }
    // Newer wins: a local file goes up when the volume lacks it or holds an older (or, at the same time, different) copy.
    const send: LocalFile[] = [];
    for (const f of local) {
      const v = kept.get(keyOf(f));
      if (v === undefined || newer(f, v) || (!newer(v, f) && v.size !== f.size)) send.push(f);
    }
    if (send.length === 0 && old !== undefined && kept.size === old.files.length) {
      await sweep(root, old.archive);
      return "unchanged";
    }

    const realLocal = new Map<string, string>();
    for (const d of ctx.dirs) {
      const real = await realpath(d.path).catch(() => undefined);
      if (real !== undefined) realLocal.set(d.name, real);
    }
    /** Opens a local file to send; undefined when it vanished since the scan or is refused. */
    const openLocal = async (f: LocalFile): Promise<FileHandle | undefined> => {
      try {
        return await openRegular(f.abs, realLocal.get(f.dir) ?? "/nonexistent");
      } catch (err) {
        if (err instanceof UnsafePathError) tally.refused += 1;
        else if (!(err instanceof MissingFileError)) throw err;
        return undefined;
      }
    };

    const sendBig = send.filter((f) => f.size >= ctx.smallFileBytes);
    const sendSmall = send.filter((f) => f.size < ctx.smallFileBytes);
    await eachLimited(sendBig, ctx.parallelCopies, ctx.signal, async (f) => {
      const parts = ["big", f.dir, ...f.path.split("/")];
      const name = parts.pop() as string;
      let folder: string;
      try {
        folder = await realDir(root, parts, true);
      } catch (err) {
        if (!(err instanceof UnsafePathError)) throw err;
        tally.refused += 1;
        return;
      }
      const handle = await openLocal(f);
      if (handle === undefined) return;
      try {
        const st = await handle.stat();
        await copyExact(handle, st.size, join(folder, name), st.mtimeMs, ctx.signal);
        tally.files += 1;
        tally.bytes += st.size;
        kept.set(keyOf(f), { dir: f.dir, path: f.path, size: st.size, mtimeMs: st.mtimeMs, packed: false });
      } finally {
        await handle.close().catch(() => undefined); // a read-only handle: nothing to lose
      }
    });

    for (const f of sendSmall) kept.delete(keyOf(f));
    let archive = old?.archive ?? null;
    const packedKept = [...kept.values()].filter((e) => e.packed);
    if (
      sendSmall.length > 0 ||
      (old !== undefined && packedKept.length !== old.files.filter((e) => e.packed).length)
    ) {
      for (const e of packedKept) kept.delete(keyOf(e));
      archive = null;
      if (packedKept.length > 0 || sendSmall.length > 0) {
        archive = `small-${randomUUID()}.tar`;
        await pack(ctx, tally, root, archive, old?.archive ?? null, packedKept, sendSmall, kept, openLocal);
      }
    }
    const manifest: Manifest = {
      version: MANIFEST_VERSION,
      writtenAt: Date.now(),
      archive,
      files: [...kept.values()],
    };
    // Last checks before the rename: the lock is still this sync's, and no writer that takes no lock changed the manifest.
    await lock.check();
    const now = await loadManifest(root);
    const same =
      read.kind === "read" ? now.kind === "read" && now.digest === read.digest : now.kind !== "read";
    if (!same)
      throw new Error("the volume's manifest changed during this sync; the next sync merges with it");
    const retired = old?.archive != null && old.archive !== archive ? join(root, old.archive) : undefined;
    // The replaced archive's age counts from now: a hydrate that read the old manifest may still open it.
    if (retired !== undefined) await touch(retired);
    await writeManifest(root, manifest);
    if (retired !== undefined) await touch(retired);
    await sweep(root, archive);
    return "synced";
  } finally {
    // Not released (a volume gone read-only meanwhile): a waiter takes it over once it is stale.
    await lock.release().catch(() => undefined);
  }
}

async function touch(path: string): Promise<void> {
  const now = new Date();
  // Gone already (swept by an older runlet): nothing left to protect.
  await utimes(path, now, now).catch(() => undefined);
}

/**
 * Writes the new archive: the packed entries kept from the old one (the volume's copy was newer),
 * then the container's small files; sets each packed entry in `kept`. A kept member missing from
 * the old archive is dropped from the manifest.
 */
async function pack(
  ctx: SyncContext,
  tally: SyncTally,
  root: string,
  name: string,
  oldArchive: string | null,
  packedKept: readonly ManifestEntry[],
  sendSmall: readonly LocalFile[],
  kept: Map<string, ManifestEntry>,
  openLocal: (f: LocalFile) => Promise<FileHandle | undefined>,
): Promise<void> {
  const tar = await loadTar();
  await writeArchive(tar, join(root, name), async (add) => {
    const fromOld = new Map(packedKept.map((e) => [keyOf(e), e]));
    if (fromOld.size > 0 && oldArchive !== null) {
      try {
        await readArchive(
          tar,
          join(root, oldArchive),
          root,
          (member, size) => fromOld.get(member)?.size === size && size <= MAX_PACKED_BYTES,
          async (member, data) => {
            const e = fromOld.get(member) as ManifestEntry;
            await add({ name: member, mtimeMs: e.mtimeMs, data });
            kept.set(member, e);
          },
        );
      } catch (err) {
        // The old archive is gone or a link: its entries are dropped, the container's files still go up.
        if (!(err instanceof MissingFileError) && !(err instanceof UnsafePathError)) throw err;
      }
    }
    for (const f of sendSmall) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      const handle = await openLocal(f);
      if (handle === undefined) continue;
      let data: Buffer;
      let mtimeMs: number;
      try {
        const st = await handle.stat();
        if (st.size > MAX_PACKED_BYTES) continue; // grew past any packed size since the scan: the next sync copies it
        data = await handle.readFile();
        mtimeMs = st.mtimeMs;
      } finally {
        await handle.close().catch(() => undefined); // a read-only handle: nothing to lose
      }
      const e: ManifestEntry = { dir: f.dir, path: f.path, size: data.length, mtimeMs, packed: true };
      await add({ name: keyOf(e), mtimeMs, data });
      kept.set(keyOf(e), e);
      tally.files += 1;
      tally.bytes += data.length;
    }
  });
}

/**
 * Removes archives the manifest no longer names and temporary files (in the mirror's folder and
 * under big/, where a killed sync leaves its copies), once older than {@link STALE_MS}; a replaced
 * archive's time was set when it stopped being named. Visits {@link MAX_FILES} entries at most.
 */
async function sweep(root: string, archive: string | null): Promise<void> {
  const now = Date.now();
  let budget = MAX_FILES;
  const removeIfStale = async (path: string) => {
    const st = await lstat(path).catch(() => undefined);
    // Removed by another sweep meanwhile, or not removable: a later sync tries again.
    if (st !== undefined && now - st.mtimeMs > STALE_MS)
      await rm(path, { force: true }).catch(() => undefined);
  };
  for (const name of await readdir(root).catch(() => [] as string[])) {
    const stale =
      (name.startsWith("small-") && name.endsWith(".tar") && name !== archive) || name.endsWith(TEMP_SUFFIX);
    if (stale) await removeIfStale(join(root, name));
  }
  // big/ itself is checked as every folder below it is: a link there (or a file) is not entered.
  const big = join(root, "big");
  const stack = (await lstat(big).catch(() => undefined))?.isDirectory() === true ? [big] : [];
  while (stack.length > 0 && budget > 0) {
    const folder = stack.pop() as string;
    // A folder removed meanwhile: nothing to sweep in it.
    const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (--budget <= 0) break;
      // Dirent types come from lstat: a link to a folder is not entered.
      if (e.isDirectory()) stack.push(join(folder, e.name));
      else if (e.isFile() && e.name.endsWith(TEMP_SUFFIX)) await removeIfStale(join(folder, e.name));
    }
  }
}
