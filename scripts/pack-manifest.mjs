#!/usr/bin/env node
// The package.json that ships. npm pack and npm publish run `prepack`, which calls this with
// `strip`, then pack the folder as it is, then run `postpack` (from the manifest npm read before
// prepack), which calls it with `restore`. `strip` leaves out what only this repository uses: its
// scripts (they run scripts/, examples/ and vitest, none of which ship; a `prepare` or `prepack`
// that runs a missing file fails as soon as anyone packs an installed copy, as `runlet init`
// does to vendor it), its devDependencies and its overrides.
//
//   node scripts/pack-manifest.mjs strip [--root DIR]     prepack (DIR: the current folder)
//   node scripts/pack-manifest.mjs restore [--root DIR]   postpack
//
// The repository's package.json waits in .tmp/pack/package.json meanwhile. A pack that stopped
// before postpack is mended by the next strip or restore; each file is written under another
// name and renamed into place, so a reader never sees half of one. scripts/pack-staged.mjs
// writes shippedManifest() into its copy instead, leaving the checkout alone.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Fields of the repository's package.json that a package user never needs. */
const REPOSITORY_ONLY = ["scripts", "devDependencies", "overrides"];

/** The package.json text that ships, made from the repository's. */
export function shippedManifest(text) {
  const manifest = JSON.parse(text);
  for (const field of REPOSITORY_ONLY) delete manifest[field];
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

function paths(root) {
  return { manifest: join(root, "package.json"), backup: join(root, ".tmp", "pack", "package.json") };
}

/** Puts the repository's package.json back; true when there was one to put back. */
export function restore(root) {
  const { manifest, backup } = paths(root);
  if (!existsSync(backup)) return false;
  renameSync(backup, manifest);
  return true;
}

/** Writes the shipped package.json in the repository's place, keeping the repository's. */
export function strip(root) {
  const { manifest, backup } = paths(root);
  if (restore(root)) {
    process.stderr.write(
      "pack-manifest: an earlier pack stopped before postpack; package.json restored first\n",
    );
  }
  const text = readFileSync(manifest, "utf8");
  mkdirSync(dirname(backup), { recursive: true });
  writeFileSync(`${backup}.part`, text);
  renameSync(`${backup}.part`, backup);
  // Written beside the backup, not beside package.json, where npm could pack a stray file.
  const next = join(dirname(backup), "shipped-package.json");
  writeFileSync(next, shippedManifest(text));
  renameSync(next, manifest);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [step, flag, dir] = process.argv.slice(2);
  // npm runs prepack and postpack in the package's folder.
  const root = flag === "--root" && dir !== undefined ? dir : process.cwd();
  try {
    if (step === "strip") strip(root);
    else if (step === "restore") restore(root);
    else throw new Error(`usage: pack-manifest.mjs strip|restore [--root DIR] (got ${step ?? "nothing"})`);
  } catch (err) {
    process.stderr.write(`pack-manifest: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
