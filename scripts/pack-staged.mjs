#!/usr/bin/env node
// Packs runlet as `npm pack` does, without touching the checkout: the files npm would pack (its own
// list, from `npm pack --dry-run`) are copied to a temporary folder with the package's README in
// README.md's place, and that folder is packed. For tests that want the tarball users get while
// other tests read the checkout's README.md (a prepack swap would change it under them). No build:
// dist/ is packed as it is, so bring it up to date first (the test suite's setup does).
//
//   node scripts/pack-staged.mjs [--pack-destination DIR]   prints npm pack's JSON
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { packageReadme } from "./package-readme.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** npm's own CLI: the one running this script, else the one installed beside this Node. */
const NPM =
  process.env.npm_execpath?.endsWith("npm-cli.js") === true
    ? process.env.npm_execpath
    : join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "bin", "npm-cli.js");

function npm(args, cwd) {
  const run = spawnSync(process.execPath, [NPM, ...args], { cwd, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`npm ${args.join(" ")} exited ${run.status}: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

/**
 * Packs `root` (runlet's checkout) into `destination` with the package's README; resolves to the
 * tarball's path and npm's description of it (`files`, `integrity`, ...).
 */
export function packStaged(destination, root = ROOT) {
  const [{ files }] = npm(["pack", "--dry-run", "--json", "--ignore-scripts"], root);
  const stage = mkdtempSync(join(tmpdir(), "runlet-stage-"));
  try {
    for (const { path } of files) {
      mkdirSync(dirname(join(stage, path)), { recursive: true });
      copyFileSync(join(root, path), join(stage, path));
    }
    writeFileSync(join(stage, "README.md"), packageReadme(root));
    const [packed] = npm(
      ["pack", stage, "--ignore-scripts", "--pack-destination", destination, "--json"],
      root,
    );
    return { tarball: join(destination, packed.filename), packed };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--pack-destination");
  const destination = at === -1 ? process.cwd() : (process.argv[at + 1] ?? process.cwd());
  try {
    const { packed } = packStaged(destination);
    process.stdout.write(`${JSON.stringify([packed], null, 2)}\n`);
  } catch (err) {
    process.stderr.write(`pack-staged: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
