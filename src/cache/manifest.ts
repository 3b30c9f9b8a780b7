import { createHash, randomUUID } from "node:crypto";
import { rename, rm, writeFile } from "node:fs/promises";
import { isAbsolute, join, normalize, resolve, sep } from "node:path";
import { z } from "zod";
import { MissingFileError, openRegular, TEMP_SUFFIX, UnsafePathError } from "./safe-fs.js";

export { TEMP_SUFFIX } from "./safe-fs.js";

/**
 * The warm cache's manifest (docs/fitness.md, "Warm cache"): the one file that says what the mirror
 * on the volume holds. It is written last, to a temporary name and renamed, so a reader sees a
 * whole manifest whose archive is whole too (each sync writes an archive of its own name first).
 */

/** The format this runlet writes and reads; any other is read as no manifest (a cold start). */
export const MANIFEST_VERSION = 1;
export const MANIFEST_NAME = "manifest.json";
/** Largest manifest read, in bytes: 100 000 entries of a few hundred bytes. Checked before a byte is read. */
export const MAX_MANIFEST_BYTES = 64 * 1_048_576; // 64 MiB
/** Most files one sync looks at and one manifest may list (a larger manifest is refused before its entries are looked at). */
export const MAX_FILES = 100_000;

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

/** What reading the manifest found: none yet, one refused (the reason says what, where and the limit), or one. */
export type ManifestRead =
  | { readonly kind: "absent" }
  | { readonly kind: "refused"; readonly reason: string }
  | { readonly kind: "read"; readonly manifest: Manifest; readonly digest: string };

const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MiB`;

/**
 * Reads the manifest at `root` (`root` resolved and checked by the caller): a link, a file over
 * {@link MAX_MANIFEST_BYTES} (checked before reading), one that is not JSON, of another version,
 * listing more than {@link MAX_FILES} files (counted before the entries are checked) or not of
 * this version's form is refused with a reason. `digest` tells whether it changed since.
 */
export async function loadManifest(root: string): Promise<ManifestRead> {
  const path = join(root, MANIFEST_NAME);
  let buf: Buffer;
  try {
    const handle = await openRegular(path, root);
    try {
      const { size } = await handle.stat();
      if (size > MAX_MANIFEST_BYTES)
        return {
          kind: "refused",
          reason: `${path} is ${mib(size)}, more than the ${mib(MAX_MANIFEST_BYTES)} a manifest may be`,
        };
      buf = await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof MissingFileError) return { kind: "absent" };
    if (err instanceof UnsafePathError) return { kind: "refused", reason: err.message };
    throw err;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(buf.toString("utf8"));
  } catch {
    // Not JSON (a torn write by some other tool): refused; the next sync rewrites it.
    return { kind: "refused", reason: `${path} is not JSON` };
  }
  const version = (raw as { version?: unknown } | null)?.version;
  if (version !== MANIFEST_VERSION)
    return {
      kind: "refused",
      reason: `${path} has version ${JSON.stringify(version)}; this runlet reads version ${MANIFEST_VERSION}`,
    };
  const files = (raw as { files?: unknown }).files;
  if (Array.isArray(files) && files.length > MAX_FILES)
    return {
      kind: "refused",
      reason: `${path} lists ${files.length} files, more than the ${MAX_FILES} a sync writes`,
    };
  const parsed = manifestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      kind: "refused",
      reason: `${path} is not a version ${MANIFEST_VERSION} manifest (${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"})`,
    };
  }
  return { kind: "read", manifest: parsed.data, digest: createHash("sha256").update(buf).digest("hex") };
}

/** The manifest at `root`, or undefined when absent or refused (see {@link loadManifest}). */
export async function readManifest(root: string): Promise<Manifest | undefined> {
  const read = await loadManifest(root).catch(() => undefined);
  return read?.kind === "read" ? read.manifest : undefined;
}

/** Writes `manifest` at `root`: to a temporary name, then renamed over the old one. */
export async function writeManifest(root: string, manifest: Manifest): Promise<void> {
  const tmp = join(root, `${MANIFEST_NAME}.${randomUUID()}${TEMP_SUFFIX}`);
  try {
    await writeFile(tmp, JSON.stringify(manifest), { flag: "wx" });
    await rename(tmp, join(root, MANIFEST_NAME));
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}

/**
 * The absolute path of `rel` inside `base`, or undefined when `rel` could leave it: absolute,
 * `..` anywhere, empty, a NUL, a backslash, or the temporary suffix. The caller still checks that
 * no symbolic link on the way leads out (safe-fs.ts).
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
