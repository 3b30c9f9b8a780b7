/**
 * What `runlet build` puts into `dist/node_modules` for a project's externals, whole (as before
 * issue 54: other platforms' binaries left out, nothing else) and pruned (the default now: source
 * maps, docs, tests and browser builds left out too), per external. For the starters, the
 * externals their package.json declares, copied from runlet's own node_modules (where their
 * packages are installed as development dependencies); for any other project folder, its
 * declared externals from its own node_modules. Sizes, not speed: one run is the figure.
 *
 *   node bin/run-ts.mjs bench/externals-size.ts [--project <dir>]...
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { copyExternals } from "../src/cli/externals.js";
import { declaredFileRules } from "../src/cli/prune-externals.js";
import { ROOT } from "./worker-process.js";

const STARTERS = ["ocr", "llm", "onnx"];

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

async function measure(label: string, names: string[], fromDir: string, rulesDir: string): Promise<void> {
  const out = await mkdtemp(join(tmpdir(), "runlet-externals-size-"));
  try {
    const rules = await declaredFileRules(rulesDir);
    const whole = await copyExternals(names, fromDir, out, { prune: false, rules });
    const pruned = await copyExternals(names, fromDir, out, { rules });
    const drop = pruned.pruned.map((p) => `${p.reason} ${mib(p.bytes)}`).join(", ");
    process.stdout.write(
      `${label}: dist/node_modules ${mib(whole.bytes)} -> ${mib(pruned.bytes)} (${whole.packages} packages; left out: ${drop})\n`,
    );
    for (const s of pruned.sizes) {
      const before = whole.sizes.find((w) => w.name === s.name)?.bytes ?? 0;
      process.stdout.write(`  ${s.name}: +${mib(before)} -> +${mib(s.bytes)} (${s.packages} packages)\n`);
    }
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

async function externalsOf(dir: string): Promise<string[]> {
  const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as {
    runlet?: { externals?: string[] };
  };
  return pkg.runlet?.externals ?? [];
}

const { values } = parseArgs({ options: { project: { type: "string", multiple: true } } });
for (const starter of STARTERS) {
  const dir = join(ROOT, "templates", starter);
  await measure(`templates/${starter}`, await externalsOf(dir), ROOT, dir);
}
for (const project of values.project ?? []) {
  const dir = resolve(project);
  await measure(project, await externalsOf(dir), dir, dir);
}
