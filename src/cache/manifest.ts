import { randomUUID } from "node:crypto";
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { isAbsolute, join, normalize, resolve, sep } from "node:path";
import { z } from "zod";

/**
 * The warm cache's manifest (docs/fitness.md, "Warm cache"): the one file that says what the mirror
 * on the volume holds. It is written last, to a temporary name and renamed, so a reader sees a
 * whole manifest whose archive is whole too (each sync writes an archive of its own name first).
 */

/** The format this runlet writes and reads; any other is read as no manifest (a cold start). */
export const MANIFEST_VERSION = 1;
export const MANIFEST_NAME = "manifest.json";
/** Suffix of every file being written; a reader never opens one, a sync removes old ones. */
export const TEMP_SUFFIX = ".runlet-tmp";
/** Largest manifest read, in bytes: 100 000 entries of a few hundred bytes. */
export const MAX_MANIFEST_BYTES = 64 * 1_048_576; // 64 MiB

const entrySchema = z.object({
  /** The folder's mirror name. */
  dir: z.string(),
  /** The file's path inside its folder, `/`-separated. */
  path: z.string(),
  size: z.number().int().min(0),
  mtimeMs: z.number().finite(),
  /** In the archive (small) or under big/ (large). */
  packed: z.boolean(),
});
export type ManifestEntry = z.infer<typeof entrySchema>;

const manifestSchema = z.object({
  version: z.literal(MANIFEST_VERSION),
  writtenAt: z.number(),
  /** The archive of the packed entries, a file name beside the manifest; null when none are packed. */
  archive: z
    .string()
    .regex(/^small-[0-9a-f-]{36}\.tar$/)
    .nullable(),
  files: z.array(entrySchema),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** The manifest at `root`, or undefined when absent, unreadable, too large, or of another version. */
export async function readManifest(root: string): Promise<Manifest | undefined> {
  let text: string;
  try {
    const buf = await readFile(join(root, MANIFEST_NAME));
    if (buf.length > MAX_MANIFEST_BYTES) return undefined;
    text = buf.toString("utf8");
  } catch {
    // No manifest yet: a cold mirror.
    return undefined;
  }
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    // Not JSON (a torn write by some other tool): as absent, so the next sync rewrites it.
    return undefined;
  }
}

/** Writes `manifest` at `root`: to a temporary name, then renamed over the old one. */
export async function writeManifest(root: string, manifest: Manifest): Promise<void> {
  const tmp = join(root, `${MANIFEST_NAME}.${randomUUID()}${TEMP_SUFFIX}`);
  try {
    await writeFile(tmp, JSON.stringify(manifest));
    await rename(tmp, join(root, MANIFEST_NAME));
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}

/**
 * The absolute path of `rel` inside `base`, or undefined when `rel` could leave it: absolute,
 * `..` anywhere, empty, a NUL, a backslash, or the temporary suffix. The caller still checks that
 * no symbolic link on the way leads out (see `insideReal` in warm-cache.ts).
 */
export function safeJoin(base: string, rel: string): string | undefined {
  if (
    rel === "" ||
    rel.includes("\0") ||
    rel.includes("\\") ||
    isAbsolute(rel) ||
    rel.endsWith(TEMP_SUFFIX)
  ) {
    return undefined;
  }
  const parts = rel.split("/");
  if (parts.some((p) => p === "" || p === "." || p === "..")) return undefined;
  const full = resolve(base, normalize(rel));
  return full.startsWith(base.endsWith(sep) ? base : base + sep) ? full : undefined;
}
