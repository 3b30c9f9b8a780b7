#!/usr/bin/env node
// Builds dist/ from src/: tsc (tsconfig.build.json) emits ES modules, .d.ts and source maps; every
// other file under src/ (a `static/` folder, a hand-written .d.ts, any asset) is copied to the same
// place under dist/, so a module can find its files next to itself in both trees.
//
//   node scripts/build.mjs             a clean build: dist/ is removed first (npm run build, prepack)
//   node scripts/build.mjs --if-stale  nothing when dist/ is newer than every source; else an
//                                      incremental build that also drops outputs of deleted sources
//                                      (npm install's prepare, the test suite's setup, npm run dev)
import { spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const SRC = join(ROOT, "src");
const DIST = join(ROOT, "dist");
/** Written last by a successful build: the newest source time it compiled, which --if-stale compares. */
const STAMP = join(DIST, ".built");
/** Files whose change means a rebuild, besides everything under src/. */
const INPUTS = ["tsconfig.json", "tsconfig.build.json", "scripts/build.mjs"].map((f) => join(ROOT, f));

/** tsc compiles these; every other file under src/ is an asset and is copied. */
const COMPILED = /(?<!\.d)\.(ts|mts|cts)$/;

/** Every file and folder under `dir`, as absolute paths. */
function walk(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    out.push(path);
    if (entry.isDirectory()) out.push(...walk(path));
  }
  return out;
}

function newestSourceTime() {
  // A folder's time changes when a file in it is added, removed or renamed.
  return Math.max(...[SRC, ...walk(SRC), ...INPUTS].map((p) => statSync(p).mtimeMs));
}

function isFresh() {
  return existsSync(STAMP) && Number(readFileSync(STAMP, "utf8")) >= newestSourceTime();
}

function tsc() {
  const bin = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const r = spawnSync(process.execPath, [bin, "-p", join(ROOT, "tsconfig.build.json")], { stdio: "inherit" });
  if (r.status !== 0) {
    process.stderr.write("build: tsc failed; dist/ is incomplete\n");
    process.exit(r.status ?? 1);
  }
}

/** The source a dist file came from: `a/b.js`, `a/b.js.map` and `a/b.d.ts` come from `a/b.ts`. */
function sourcesOf(distFile) {
  const rel = relative(DIST, distFile);
  const asset = join(SRC, rel);
  const m = /^(.*)\.(m|c)?(js|js\.map|d\.ts)$/.exec(rel);
  if (m === null) return [asset];
  return [asset, join(SRC, `${m[1]}.${m[2] ?? ""}ts`)];
}

/** Removes what a deleted or renamed source left in dist/ (an incremental tsc never does). */
function pruneOrphans() {
  for (const path of walk(DIST).reverse()) {
    if (path === STAMP || path.endsWith(".tsbuildinfo")) continue;
    if (statSync(path).isDirectory()) {
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
    } else if (!sourcesOf(path).some((s) => existsSync(s))) {
      rmSync(path);
    }
  }
}

function copyAssets() {
  for (const path of walk(SRC)) {
    if (statSync(path).isDirectory() || COMPILED.test(path)) continue;
    const target = join(DIST, relative(SRC, path));
    mkdirSync(dirname(target), { recursive: true });
    cpSync(path, target);
  }
}

const ifStale = process.argv.includes("--if-stale");
if (ifStale && isFresh()) process.exit(0);
if (!ifStale) rmSync(DIST, { recursive: true, force: true });
// An incremental tsc trusts its build-info file; without the stamp, outputs may have been removed.
if (ifStale && !existsSync(STAMP)) rmSync(DIST, { recursive: true, force: true });
// Taken before compiling: a file saved during the build makes the next --if-stale build again.
const compiledUpTo = newestSourceTime();
tsc();
copyAssets();
pruneOrphans();
writeFileSync(STAMP, String(compiledUpTo));
