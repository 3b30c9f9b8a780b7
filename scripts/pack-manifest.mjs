#!/usr/bin/env node
// The package.json that ships. npm pack and npm publish run `prepack`, which calls this with
// `strip`, then pack the folder as it is, then run `postpack`, which calls it with `restore`.
// `strip` leaves out what only this repository uses: its scripts (they run scripts/, examples/,
// vitest, none of which ship; a `prepare` or `prepack` that runs a missing file fails the moment
// anyone packs an installed copy, as `runlet init` does to vendor it), its devDependencies and
// its overrides. The repository's own package.json is kept in .tmp/ meanwhile; a pack that died
// before `restore` is repaired by the next `strip` or `restore`.
//
//   node scripts/pack-manifest.mjs strip     (prepack)
//   node scripts/pack-manifest.mjs restore   (postpack)
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const MANIFEST = join(ROOT, "package.json");
const KEPT = join(ROOT, ".tmp", "package.json.repository");
/** Fields of the repository's package.json that a package user never needs. */
const REPOSITORY_ONLY = ["scripts", "devDependencies", "overrides"];

/** Writes through a temporary file and a rename, so a reader never sees half a file. */
function writeAtomically(path, text) {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

function restore() {
  if (!existsSync(KEPT)) return;
  writeAtomically(MANIFEST, readFileSync(KEPT, "utf8"));
  rmSync(KEPT);
}

function strip() {
  restore();
  const text = readFileSync(MANIFEST, "utf8");
  mkdirSync(dirname(KEPT), { recursive: true });
  writeFileSync(KEPT, text);
  const manifest = JSON.parse(text);
  for (const field of REPOSITORY_ONLY) delete manifest[field];
  writeAtomically(MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`);
}

const mode = process.argv[2];
if (mode === "strip") strip();
else if (mode === "restore") restore();
else {
  process.stderr.write("usage: node scripts/pack-manifest.mjs strip|restore\n");
  process.exit(2);
}
