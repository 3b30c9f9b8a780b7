#!/usr/bin/env node
// npm always packs the root README.md, and this repository's README.md is for contributors. The
// README of the package, for the people who install it, is package-readme.md: npm pack's prepack
// puts it in README.md's place and postpack puts the repository's back.
//
//   node scripts/package-readme.mjs swap [--root DIR]     prepack (DIR: the current folder)
//   node scripts/package-readme.mjs restore [--root DIR]  postpack
//
// A pack that fails or is interrupted between the two leaves the package's README in place (npm
// runs no postpack then); the repository's waits in .tmp/pack/README.md. The next swap or restore
// puts it back first, and a swapped README.md starts with MARK, so neither step can mistake it for
// the repository's. Every file is written under another name and renamed into place, so a step cut
// short leaves either the old file or the new one, never half of one.
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The first line of a swapped README.md (an HTML comment: a Markdown viewer shows nothing). */
export const MARK =
  "<!-- runlet's package README (package-readme.md in the repository); in a checkout, `node scripts/package-readme.mjs restore` puts the repository's README.md back -->";

/** The files of one swap, under `root`. */
function paths(root) {
  return {
    readme: join(root, "README.md"),
    source: join(root, "package-readme.md"),
    backup: join(root, ".tmp", "pack", "README.md"),
  };
}

function isSwapped(file) {
  return existsSync(file) && readFileSync(file, "utf8").startsWith(MARK);
}

/** The README.md the package ships: MARK, then package-readme.md under `root`. */
export function packageReadme(root) {
  return `${MARK}\n\n${readFileSync(paths(root).source, "utf8")}`;
}

/** Puts the repository's README.md back from the backup; true when there was one to put back. */
export function restore(root) {
  const { readme, backup } = paths(root);
  if (existsSync(backup)) {
    renameSync(backup, readme);
    return true;
  }
  if (isSwapped(readme)) {
    throw new Error(
      `${readme} is the package's README and ${backup} is gone: take the repository's from git (git checkout README.md)`,
    );
  }
  return false;
}

/** Puts package-readme.md in README.md's place, keeping the repository's README.md in the backup. */
export function swap(root) {
  const { readme, backup } = paths(root);
  if (restore(root)) {
    process.stderr.write(
      "package-readme: an earlier pack stopped before postpack; README.md restored first\n",
    );
  }
  const text = packageReadme(root);
  mkdirSync(dirname(backup), { recursive: true });
  copyFileSync(readme, `${backup}.part`);
  renameSync(`${backup}.part`, backup);
  // Written beside the backup, not beside README.md, where npm would pack a stray README.md.part.
  const next = join(dirname(backup), "package-README.md");
  writeFileSync(next, text);
  renameSync(next, readme);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [step, flag, dir] = process.argv.slice(2);
  // npm runs prepack and postpack in the package's folder.
  const root = flag === "--root" && dir !== undefined ? dir : process.cwd();
  try {
    if (step === "swap") swap(root);
    else if (step === "restore") restore(root);
    else throw new Error(`usage: package-readme.mjs swap|restore [--root DIR] (got ${step ?? "nothing"})`);
  } catch (err) {
    process.stderr.write(`package-readme: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
