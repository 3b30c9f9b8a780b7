#!/usr/bin/env node
// Lints the package as users get it (npm test runs this): publint checks package.json against the
// files npm would pack; attw packs a tarball and checks that every subpath's types resolve.
// runlet is ESM only, so attw's esm-only profile leaves out the CommonJS `require` and the
// pre-exports node10 resolutions, which an ESM-only package cannot serve by design.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The file of a devDependency's command (its package.json `bin`). */
function binOf(pkg, name) {
  const manifestPath = join(ROOT, "node_modules", pkg, "package.json");
  const { bin } = JSON.parse(readFileSync(manifestPath, "utf8"));
  return join(dirname(manifestPath), typeof bin === "string" ? bin : bin[name]);
}

function run(file, args) {
  const r = spawnSync(process.execPath, [file, ...args], { cwd: ROOT, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/** npm's own CLI: the one running this script, else the one installed beside this Node. */
const NPM =
  process.env.npm_execpath?.endsWith("npm-cli.js") === true
    ? process.env.npm_execpath
    : join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "bin", "npm-cli.js");

run(join(ROOT, "scripts", "build.mjs"), ["--if-stale"]);
run(binOf("publint", "publint"), ["--strict"]);
const out = mkdtempSync(join(tmpdir(), "runlet-attw-"));
try {
  // dist/ is fresh (above), so pack as is instead of a second, clean build by prepack.
  const pack = spawnSync(
    process.execPath,
    [NPM, "pack", "--ignore-scripts", "--pack-destination", out, "--json"],
    {
      cwd: ROOT,
      encoding: "utf8",
    },
  );
  if (pack.status !== 0) {
    process.stderr.write(pack.stderr);
    process.exit(pack.status ?? 1);
  }
  const [{ filename }] = JSON.parse(pack.stdout);
  run(binOf("@arethetypeswrong/cli", "attw"), [join(out, filename), "--profile", "esm-only"]);
} finally {
  rmSync(out, { recursive: true, force: true });
}
