import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { importPeer } from "../optional-peers.js";
import { settle } from "../task-sink.js";
import { openRegular, tempName } from "./safe-fs.js";

/**
 * The warm cache's archive of small files (docs/fitness.md, "Warm cache"): a tar read and written
 * through `stream.pipeline`, so a failing volume (read-only, full, gone) rejects the sync or hydrate
 * that reads or writes it, and never reaches the process as an unhandled `'error'` event.
 */

export type TarStream = typeof import("tar-stream");

/** Largest packed file read into memory, in bytes: the largest `smallFileBytes` allowed. */
export const MAX_PACKED_BYTES = 67_108_864; // 64 MiB

export function loadTar(): Promise<TarStream> {
  return importPeer<TarStream>("tar-stream", "tar-stream", "the warm cache (warmCache)");
}

/**
 * Reads each member of the archive at `path` (a regular file under `realRoot`, opened without
 * following a link) that `want` asks for by name and size; only regular-file members are offered.
 */
export async function readArchive(
  tar: TarStream,
  path: string,
  realRoot: string,
  want: (name: string, size: number) => boolean,
  take: (name: string, data: Buffer) => Promise<void>,
): Promise<void> {
  const handle = await openRegular(path, realRoot);
  const extract = tar.extract();
  const flowing = pipeline(handle.createReadStream(), extract);
  // Awaited below: ignored here only so a failure while the loop is still reading is not unhandled.
  settle(flowing, () => undefined);
  try {
    for await (const entry of extract) {
      const { name, size, type } = entry.header;
      if (type !== "file" || !want(name, size)) {
        entry.resume();
        continue;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      await take(name, Buffer.concat(chunks));
    }
  } catch (err) {
    extract.destroy(err as Error);
    throw err;
  } finally {
    await handle.close().catch(() => undefined); // already closed by its stream's end: nothing to do
  }
  await flowing;
}

/** One member of a new archive. */
export interface ArchiveMember {
  readonly name: string;
  readonly mtimeMs: number;
  readonly data: Buffer;
}

/**
 * Writes an archive at `dest` from the members `fill` adds one at a time, under a fresh temporary
 * name opened with `O_EXCL`, renamed once whole. A write error (EROFS, ENOSPC) rejects the pending
 * `add` and the whole call; the temporary file is removed.
 */
export async function writeArchive(
  tar: TarStream,
  dest: string,
  fill: (add: (member: ArchiveMember) => Promise<void>) => Promise<void>,
): Promise<void> {
  const tmp = tempName(dest);
  const pack = tar.pack();
  const flowing = pipeline(pack, createWriteStream(tmp, { flags: "wx" }));
  // Awaited below: ignored here only so a failure while members are still being added is not unhandled.
  settle(flowing, () => undefined);
  const add = (m: ArchiveMember) =>
    Promise.race([
      new Promise<void>((resolve, reject) => {
        const sink = pack.entry(
          { name: m.name, size: m.data.length, mtime: new Date(m.mtimeMs), type: "file", mode: 0o644 },
          m.data,
          (err) => (err ? reject(err) : resolve()),
        );
        // The entry's own stream re-emits the pack's failure: without a listener it would end the process.
        sink.on("error", reject);
      }),
      flowing,
    ]);
  try {
    await fill(add);
    pack.finalize();
    await flowing;
    await rename(tmp, dest);
  } catch (err) {
    pack.destroy();
    await flowing.catch(() => undefined); // the error above is the one to report
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}
