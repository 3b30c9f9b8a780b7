import type { Dirent } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { RunletError } from "../errors.js";
import { hfCacheDir } from "./config.js";

/**
 * Resolves a model the platform cached for the endpoint (docs/models.md, "Cached models"). The
 * cache follows Hugging Face's layout: `models--{org}--{name}/refs/{revision}` holds the commit
 * hash of a branch or tag, and `snapshots/{hash}/` the repository's files at that commit (links
 * into `blobs/`). Everything read here comes from a volume: each name is checked, and a miss is
 * an error that lists what the cache does hold.
 */

/** What to resolve. */
export interface CachedModelOptions {
  /** A branch, a tag or a commit hash. @default "main" */
  readonly revision?: string;
  /** A file in the repository (`onnx/model.onnx`); without one, the snapshot's folder is resolved. */
  readonly file?: string;
  /** The cache folder (the `hub` folder). @default RUNLET_HF_CACHE, else /runpod-volume/huggingface-cache/hub */
  readonly cacheDir?: string;
  /** The environment RUNLET_HF_CACHE is read from when `cacheDir` is not given. @default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** A resolved cached model. */
export interface CachedModel {
  /** The repository id, `org/name`. */
  readonly repo: string;
  /** The revision asked for. */
  readonly revision: string;
  /** The commit hash it resolved to. */
  readonly commit: string;
  /** The snapshot's folder: the repository's files at that commit. */
  readonly snapshotDir: string;
  /** The file asked for, else the snapshot's folder. */
  readonly path: string;
}

/** A repository id: `name` or `org/name`, as the hub allows. */
const REPO_ID = /^(?:[\w.-]{1,96}\/)?[\w.-]{1,96}$/;
/** A branch or tag name (`main`, `v1.0`, `refs/pr/1`), or a commit hash. */
const REVISION = /^[\w.-]+(?:\/[\w.-]+)*$/;
/** A commit hash as refs/ files hold it. */
const COMMIT = /^[0-9a-f]{40}$/;
/** Most names an error lists. */
const MAX_LISTED = 20;

/** `org/name` → `models--org--name`, the cache's folder name. */
export function cacheFolderName(repo: string): string {
  return `models--${repo.split("/").join("--")}`;
}

function notCached(message: string, details: Record<string, unknown>): RunletError {
  return new RunletError("RUNLET_MODEL_NOT_CACHED", message, { details });
}

function list(names: readonly string[]): string {
  if (names.length === 0) return "nothing";
  const shown = names.slice(0, MAX_LISTED).join(", ");
  return names.length > MAX_LISTED ? `${shown} and ${names.length - MAX_LISTED} more` : shown;
}

async function entries(dir: string): Promise<Dirent[] | undefined> {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch {
    return undefined; // Missing or unreadable: the caller says what it looked for.
  }
}

/** The models a cache folder holds, as repository ids. */
async function cachedRepos(cacheDir: string): Promise<string[]> {
  const found = (await entries(cacheDir)) ?? [];
  return found
    .filter((e) => e.isDirectory() && e.name.startsWith("models--"))
    .map((e) => e.name.slice("models--".length).split("--").join("/"))
    .sort();
}

/** The refs/ names under a model's folder (`main`, `pr/1`). */
async function refNames(dir: string, prefix = "", depth = 0): Promise<string[]> {
  const out: string[] = [];
  for (const e of (await entries(dir)) ?? []) {
    if (e.isFile()) out.push(`${prefix}${e.name}`);
    else if (e.isDirectory() && depth < 4)
      out.push(...(await refNames(join(dir, e.name), `${prefix}${e.name}/`, depth + 1)));
  }
  return out.sort();
}

/** Checks a repository-relative file name: no `..`, no absolute path. */
function checkFile(file: string): void {
  const parts = file.split("/");
  if (
    file === "" ||
    file.startsWith("/") ||
    parts.some((p) => p === "" || p === "." || p === "..") ||
    file.includes("\\")
  ) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `a cached model's file must be a path inside the repository ("onnx/model.onnx"), got ${JSON.stringify(file.slice(0, 200))}`,
    );
  }
}

/**
 * Resolves `repo` (`org/name`) in the cache at a revision (`main` by default) and, with `file`, a
 * file of it. Throws RUNLET_MODEL_NOT_CACHED naming what was looked for and listing what the cache
 * holds (its models, the model's revisions and snapshots, the snapshot's files).
 *
 * @example
 * const { path } = await resolveCachedModel("onnx-community/all-MiniLM-L6-v2", { file: "onnx/model.onnx" });
 */
export async function resolveCachedModel(
  repo: string,
  options: CachedModelOptions = {},
): Promise<CachedModel> {
  if (
    typeof repo !== "string" ||
    !REPO_ID.test(repo) ||
    repo.split("/").some((p) => p === "." || p === "..")
  ) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `a cached model is named by its repository id, "org/name", got ${JSON.stringify(String(repo).slice(0, 200))}`,
    );
  }
  const revision = options.revision ?? "main";
  if (!REVISION.test(revision) || revision.split("/").includes("..")) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `a cached model's revision is a branch, a tag or a commit hash, got ${JSON.stringify(revision.slice(0, 200))}`,
    );
  }
  if (options.file !== undefined) checkFile(options.file);
  const cacheDir = options.cacheDir ?? hfCacheDir(options.env);
  const modelDir = join(cacheDir, cacheFolderName(repo));
  const where = `${repo} (revision ${revision}) is not in the model cache at ${cacheDir}`;
  if ((await entries(modelDir)) === undefined) {
    const repos = await cachedRepos(cacheDir);
    throw notCached(
      `${where}: no ${cacheFolderName(repo)} folder; the cache holds ${list(repos)}. ` +
        "Choose the model in the endpoint's settings (Model) so the platform caches it, or point RUNLET_HF_CACHE at a folder that holds it",
      { repo, revision, cacheDir, cached: repos.slice(0, MAX_LISTED) },
    );
  }
  const snapshotsDir = join(modelDir, "snapshots");
  const snapshots = ((await entries(snapshotsDir)) ?? [])
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const refs = await refNames(join(modelDir, "refs"));
  let commit: string | undefined;
  if (COMMIT.test(revision)) commit = revision;
  else if (refs.includes(revision)) {
    const text = (await readFile(join(modelDir, "refs", revision), "utf8").catch(() => "")).trim();
    if (!COMMIT.test(text)) {
      throw notCached(
        `${where}: refs/${revision} holds ${JSON.stringify(text.slice(0, 80))}, not a commit hash`,
        {
          repo,
          revision,
          cacheDir,
        },
      );
    }
    commit = text;
  }
  if (commit === undefined || !snapshots.includes(commit)) {
    throw notCached(
      `${where}: ${commit === undefined ? `no refs/${revision}` : `no snapshot ${commit}`}; the model's revisions: ${list(refs)}; its snapshots: ${list(snapshots)}`,
      { repo, revision, cacheDir, refs, snapshots: snapshots.slice(0, MAX_LISTED) },
    );
  }
  const snapshotDir = join(snapshotsDir, commit);
  let path = snapshotDir;
  if (options.file !== undefined) {
    path = join(snapshotDir, ...options.file.split("/"));
    // stat follows the snapshot's link into blobs/: a link whose blob is missing (a download cut short) is a miss.
    const info = await stat(path).catch(() => undefined);
    if (info === undefined || !info.isFile()) {
      const files = await snapshotFiles(snapshotDir);
      throw notCached(
        `${where}: snapshot ${commit} has no file ${options.file}${info === undefined ? "" : " (it is a folder)"}; its files: ${list(files)}`,
        { repo, revision, cacheDir, commit, files: files.slice(0, MAX_LISTED) },
      );
    }
  }
  return { repo, revision, commit, snapshotDir, path };
}

/** The files of a snapshot, repository-relative, depth-bounded. */
async function snapshotFiles(dir: string, prefix = "", depth = 0): Promise<string[]> {
  const out: string[] = [];
  for (const e of (await entries(dir)) ?? []) {
    if (out.length >= MAX_LISTED * 2) break;
    if (e.isDirectory() && depth < 4)
      out.push(...(await snapshotFiles(join(dir, e.name), `${prefix}${e.name}/`, depth + 1)));
    else if (!e.isDirectory()) out.push(`${prefix}${e.name}`);
  }
  return out.sort();
}
