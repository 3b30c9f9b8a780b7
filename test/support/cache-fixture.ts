import { execFile } from "node:child_process";
import {
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  rm,
  stat,
  truncate,
  utimes,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import {
  checkWarmCacheOptions,
  type Manifest,
  WarmCache,
  type WarmCacheOptions,
} from "../../src/cache/index.js";
import { createLogger } from "../../src/log/index.js";
import { logSink } from "./workers.js";

// Real folders in a temporary directory stand in for the container's cache folders and for the
// network volume's mount; where a fault needs a real filesystem (read-only, full), a tmpfs is mounted.

const run = promisify(execFile);

export const NOW = Date.now();
export const OLD = NOW - 100_000;
/** Over the 1 KiB threshold these tests use: copied one by one. */
export const BIG = Buffer.alloc(4096, 7);

/** A temporary base folder; `close()` unmounts what was mounted under it and removes it. */
export async function cacheFixture() {
  const tmp = await mkdtemp(join(tmpdir(), "runlet-cache-"));
  const mounts: string[] = [];
  let n = 0;
  return {
    tmp,
    /** A fresh volume folder (a tmpfs of `tmpfsBytes` when given) and a way to make containers on it. */
    async setup(options: Partial<WarmCacheOptions> = {}, tmpfsBytes?: number) {
      const base = join(tmp, `case-${++n}`);
      const volume = join(base, "volume");
      await mkdir(volume, { recursive: true });
      if (tmpfsBytes !== undefined) {
        await mountTmpfs(volume, tmpfsBytes);
        mounts.push(volume);
      }
      const root = join(volume, ".runlet-cache", "ep1");
      const container = (name: string, extra: Partial<WarmCacheOptions> = {}) => {
        const dir = join(base, name, "hf");
        const sink = logSink();
        const log = createLogger({ platform: true, level: "debug", destination: sink.stream });
        const settings = checkWarmCacheOptions({
          dirs: [{ path: dir, name: "hf" }],
          volume,
          smallFileBytes: 1024,
          ...options,
          ...extra,
        });
        return { dir, sink, settings, cache: new WarmCache(settings, log, "ep1") };
      };
      return { base, volume, root, container };
    },
    /** Mounts a tmpfs at `dir` (made when missing), unmounted by `close()`. */
    async tmpfs(dir: string, bytes: number) {
      await mkdir(dir, { recursive: true });
      await mountTmpfs(dir, bytes);
      mounts.push(dir);
    },
    async close() {
      for (const m of mounts.reverse()) await run("umount", ["-l", m]).catch(() => undefined);
      await rm(tmp, { recursive: true, force: true });
    },
  };
}

async function mountTmpfs(dir: string, bytes: number): Promise<void> {
  await run("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir]);
}

/** Remounts the tmpfs at `dir` read-only. */
export async function remountReadOnly(dir: string): Promise<void> {
  await run("mount", ["-o", "remount,ro", dir]);
}

/**
 * Why a tmpfs cannot be mounted here (not root, no CAP_SYS_ADMIN, no `mount`), or undefined when
 * it can: the fault tests that need one skip with this reason.
 */
export async function tmpfsUnavailable(): Promise<string | undefined> {
  const probe = await mkdtemp(join(tmpdir(), "runlet-mount-probe-"));
  try {
    await mountTmpfs(probe, 65_536);
    await run("umount", [probe]);
    return undefined;
  } catch (err) {
    return `mounting a tmpfs is not permitted here (${String((err as Error).message).split("\n")[0]})`;
  } finally {
    await rm(probe, { recursive: true, force: true });
  }
}

/** Fills the filesystem of `dir` until it is full, then frees `leaveBytes` (in 4 KiB pages). */
export async function fill(dir: string, leaveBytes = 0): Promise<void> {
  const handle = await open(join(dir, "filler"), "w");
  const chunk = Buffer.alloc(65_536, 1);
  try {
    for (;;) await handle.write(chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    await handle.close();
  }
  if (leaveBytes > 0) {
    const { size } = await stat(join(dir, "filler"));
    await truncate(join(dir, "filler"), Math.max(0, size - leaveBytes));
  }
}

export async function put(dir: string, rel: string, content: string | Buffer, mtimeMs = NOW): Promise<void> {
  const path = join(dir, rel);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
  await utimes(path, new Date(mtimeMs), new Date(mtimeMs));
}

/** Every file under `dir`, as `rel → content`. */
export async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string, prefix: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await walk(join(d, e.name), `${prefix}${e.name}/`);
      else if (e.isFile()) out[`${prefix}${e.name}`] = (await readFile(join(d, e.name))).toString("latin1");
    }
  };
  await walk(dir, "");
  return out;
}

/** Every path under `dir` (files, folders, links), relative. */
export async function paths(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, prefix: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      out.push(`${prefix}${e.name}`);
      if (e.isDirectory()) await walk(join(d, e.name), `${prefix}${e.name}/`);
    }
  };
  await walk(dir, "");
  return out.sort();
}

/** Writes a manifest by hand, as a hostile or broken writer could. */
export async function writeManifestFile(root: string, manifest: Partial<Manifest> & Pick<Manifest, "files">) {
  await mkdir(root, { recursive: true });
  await writeFile(
    join(root, "manifest.json"),
    JSON.stringify({ version: 1, writtenAt: NOW, archive: null, ...manifest }),
  );
}

/** A manifest entry of folder `hf`. */
export function entry(path: string, size: number, packed: boolean, mtimeMs = NOW) {
  return { dir: "hf", path, size, mtimeMs, packed };
}

/** The log lines of a sink whose message matches. */
export function linesMatching(sink: { lines: Array<Record<string, unknown>> }, re: RegExp) {
  return sink.lines.filter((l) => re.test(String(l["message"])));
}
