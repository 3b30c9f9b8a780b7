import { existsSync } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { isBuiltin } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { RunletError } from "../errors.js";
import { AWS_SDK_PEERS } from "../optional-peers.js";
import { copyPackage } from "./copy-package.js";
import { RUNLET_ROOT } from "./paths.js";
import {
  type ExternalFileRules,
  isOtherPlatform,
  NO_FILE_RULES,
  type PruneReason,
} from "./prune-externals.js";

export { isOtherPlatform };

/**
 * Packages a bundle cannot hold (docs/images.md, "What cannot be bundled"): those with native
 * binaries, and those that find their own files through `__dirname`, `__filename` or
 * `import.meta.url` (inside a bundle those name the bundle's folder, not the package's). `runlet
 * build` finds them in esbuild's inputs, leaves them out of the bundle, and copies them with
 * their dependencies into `dist/node_modules`, pruned of other platforms' binaries, so `dist/`
 * stays the one folder an image needs.
 */

/** A package kept out of the bundle and why. */
export interface External {
  readonly name: string;
  /** Why: "declared in package.json", "native binary (bin/x.node)", "finds its own files through __dirname (lib/a.js)". */
  readonly reason: string;
}

/** The package.json key holding a project's declared externals: `"runlet": { "externals": [...] }`. */
export const EXTERNALS_KEY = "runlet.externals";

/** Names npm allows for a package (scoped or not). */
const PACKAGE_NAME = /^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*$/i;

/**
 * The externals a project declares in its package.json (`"runlet": {"externals": ["sharp"]}`), or
 * `[]` without one. A malformed field is an error naming it.
 */
export async function declaredExternals(projectDir: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(join(projectDir, "package.json"), "utf8");
  } catch {
    return []; // No package.json (a lone handler file): nothing declared.
  }
  let pkg: { runlet?: { externals?: unknown } };
  try {
    pkg = JSON.parse(text) as typeof pkg;
  } catch (err) {
    throw new RunletError("RUNLET_BUILD_FAILED", `package.json is not JSON: ${(err as Error).message}`);
  }
  const value = pkg.runlet?.externals;
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string" && PACKAGE_NAME.test(v))) {
    throw new RunletError(
      "RUNLET_BUILD_FAILED",
      `package.json's "runlet": {"externals": ...} must be a list of package names, got ${JSON.stringify(value).slice(0, 200)}`,
    );
  }
  return [...new Set(value as string[])];
}

/** The package a path inside a node_modules folder belongs to: its name and folder. */
export function packageOf(file: string): { name: string; dir: string } | undefined {
  const parts = file.split(/[\\/]/);
  const at = parts.lastIndexOf("node_modules");
  if (at < 0 || at + 1 >= parts.length) return undefined;
  const scoped = parts[at + 1]?.startsWith("@") === true;
  const nameParts = parts.slice(at + 1, at + (scoped ? 3 : 2));
  if (nameParts.length < (scoped ? 2 : 1)) return undefined;
  return { name: nameParts.join("/"), dir: parts.slice(0, at + 1 + nameParts.length).join(sep) };
}

/** The folder of package `name` as Node finds it from `fromDir`: the nearest node_modules/<name> up the tree. */
export function findPackageDir(name: string, fromDir: string): string | undefined {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

interface Manifest {
  name?: string;
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

async function manifest(dir: string): Promise<Manifest> {
  return JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Manifest;
}

/** Package folders reachable from `roots` through dependencies (optional and installed peers too), in order found. */
async function dependencyClosure(roots: readonly { name: string; from: string }[]): Promise<string[]> {
  const seen = new Set<string>();
  const queue = roots.map((r) => findPackageDir(r.name, r.from)).filter((d) => d !== undefined);
  while (queue.length > 0) {
    const dir = queue.shift() as string;
    if (seen.has(dir)) continue;
    seen.add(dir);
    const m = await manifest(dir).catch(() => ({}) as Manifest);
    const names = [
      ...Object.keys(m.dependencies ?? {}),
      ...Object.keys(m.optionalDependencies ?? {}),
      ...Object.keys(m.peerDependencies ?? {}),
    ];
    for (const name of names) {
      // Another platform's binary package, even when installed (a lockfile's or a forced install).
      if (isOtherPlatformPackage(name)) continue;
      // A missing optional dependency is another platform's; a missing peer is not needed.
      const found = findPackageDir(name, dir);
      if (found !== undefined && !seen.has(found)) queue.push(found);
    }
  }
  return [...seen];
}

let runletOwn: Promise<Set<string>> | undefined;

/**
 * The names of runlet's own dependencies (and their dependencies): runlet's tests prove they
 * bundle, though some mention `__dirname` (pino's transports, undici), so they are never
 * reported.
 */
function runletDependencyNames(): Promise<Set<string>> {
  runletOwn ??= (async () => {
    const own = await manifest(RUNLET_ROOT);
    const roots = [...Object.keys(own.dependencies ?? {}), ...AWS_SDK_PEERS, "pino-pretty"].map((name) => ({
      name,
      from: RUNLET_ROOT,
    }));
    const dirs = await dependencyClosure(roots);
    const names = new Set(["runlet"]);
    for (const dir of dirs) names.add((await manifest(dir)).name ?? "");
    return names;
  })();
  return runletOwn;
}

/**
 * Packages known to need their own files at run time whatever the scan finds, with the reason
 * shown. node-llama-cpp picks its platform's llama.cpp build among the `@node-llama-cpp/*`
 * packages (CPU, CUDA, Vulkan) by names it computes, and finds its templates and local builds
 * beside itself.
 */
const KNOWN_EXTERNALS: Readonly<Record<string, string>> = {
  "node-llama-cpp":
    "loads this platform's llama.cpp binaries from the @node-llama-cpp/* packages at run time",
};

/** Code that locates files relative to itself. */
const SELF_LOCATING = /\b__dirname\b|\b__filename\b|\bimport\.meta\.url\b/;

/** The first native-binary marker in a package's folder (depth-bounded, own files only). */
async function nativeMarker(dir: string, depth = 0): Promise<string | undefined> {
  if (depth > 4) return undefined;
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return undefined;
  }
  // Another platform's binaries say as much, but this platform's name the file that loads.
  entries.sort((a, b) => Number(isOtherPlatform(a.name)) - Number(isOtherPlatform(b.name)));
  for (const e of entries) {
    if (e.isFile() && (e.name.endsWith(".node") || (depth === 0 && e.name === "binding.gyp"))) {
      return join(dir, e.name);
    }
    if (e.isDirectory() && e.name === "prebuilds" && depth === 0) return join(dir, e.name);
  }
  for (const e of entries) {
    if (e.isDirectory() && e.name !== "node_modules" && !e.name.startsWith(".")) {
      const found = await nativeMarker(join(dir, e.name), depth + 1);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** The package a module specifier names (`@scope/name/x.json` → `@scope/name`), or undefined for a relative path, a URL or a built-in. */
export function packageOfSpecifier(specifier: string): string | undefined {
  if (specifier === "" || /^[./]/.test(specifier) || /^[a-z][a-z0-9+.-]*:/i.test(specifier)) return undefined;
  const parts = specifier.split("/");
  const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
  if (name === undefined || isBuiltin(name)) return undefined;
  return PACKAGE_NAME.test(name) ? name : undefined;
}

/** A string literal as the argument of a call: `("x")`, `('x')`, `(\`x\`)` without `${}`. */
const LITERAL_ARG = String.raw`\(\s*(?<quote>["'\x60])(?<specifier>[^"'\x60$\n]+)\k<quote>\s*[,)]`;

/**
 * The module specifiers a file resolves to paths with a string literal: `require.resolve("x")`,
 * `import.meta.resolve("x")`, `createRequire(...).resolve("x")`, and `r.resolve("x")` where
 * `r` was made by `createRequire(...)`. Each with the call as written (for the reason shown).
 */
export function resolvedSpecifiers(code: string): { specifier: string; call: string }[] {
  const callers = [
    "require",
    String.raw`import\.meta`,
    String.raw`(?:[\w$]+\.)?createRequire\([^()]*(?:\([^()]*\)[^()]*)*\)`,
  ];
  for (const m of code.matchAll(
    /\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:[\w$]+\.)?createRequire\(/g,
  )) {
    const name = m[1] ?? "";
    if (name !== "require") callers.push(name.replace(/\$/g, "\\$"));
  }
  const found: { specifier: string; call: string }[] = [];
  const pattern = new RegExp(
    String.raw`(?<![\w$.])(?<caller>${callers.join("|")})\.resolve${LITERAL_ARG}`,
    "g",
  );
  for (const m of code.matchAll(pattern)) {
    const specifier = m.groups?.["specifier"] ?? "";
    const caller = m.groups?.["caller"] ?? "";
    const head = caller.includes("createRequire(") ? "createRequire(...)" : caller.replaceAll("\\", "");
    found.push({ specifier, call: `${head}.resolve(${JSON.stringify(specifier)})` });
  }
  return found;
}

/**
 * Packages whose files the code in `inputs` resolves at run time (`require.resolve("pkg/model.onnx")`
 * and the like; {@link resolvedSpecifiers}): bundled or not, the package must be in
 * `dist/node_modules` for the resolution to find its files, so each is external. Only the project's
 * code and other packages' are read, not runlet's or its dependencies'.
 */
async function findResolved(
  inputs: readonly string[],
  cwd: string,
  skip: ReadonlySet<string>,
  own: ReadonlySet<string>,
): Promise<External[]> {
  const found = new Map<string, External>();
  const runletCode = ["dist", "src"].map((d) => join(RUNLET_ROOT, d) + sep);
  for (const file of inputs) {
    if (!/\.[cm]?[jt]sx?$/.test(file) || runletCode.some((d) => file.startsWith(d))) continue;
    const from = packageOf(file)?.name;
    if (from !== undefined && own.has(from)) continue;
    for (const { specifier, call } of resolvedSpecifiers(await readFile(file, "utf8").catch(() => ""))) {
      const name = packageOfSpecifier(specifier);
      if (name === undefined || skip.has(name) || own.has(name) || found.has(name)) continue;
      found.set(name, {
        name,
        reason: `its files are resolved at run time: ${call} in ${relative(cwd, file).split(sep).join("/")}`,
      });
    }
  }
  return [...found.values()];
}

/**
 * Looks at the files esbuild read (a metafile's inputs, relative to `cwd`) and returns the
 * packages that cannot be bundled, each with its reason: native binaries, packages that find
 * their own files, and packages whose files the code resolves. `skip` names packages already
 * external.
 */
export async function findUnbundlable(
  inputs: readonly string[],
  cwd: string,
  skip: ReadonlySet<string>,
): Promise<External[]> {
  const own = await runletDependencyNames();
  const byPackage = new Map<string, { dir: string; files: string[] }>();
  for (const input of inputs) {
    if (input.startsWith("<")) continue;
    const file = join(cwd, input.replace(/^[a-z-]+:/, ""));
    const pkg = packageOf(file);
    if (pkg === undefined && file.endsWith(".node")) {
      throw new RunletError(
        "RUNLET_BUILD_FAILED",
        `${relative(cwd, file)} is a native addon, which cannot go into a bundle: load it at run time from a path outside the bundle, or install it as a package and name that package in package.json as "runlet": {"externals": [...]}`,
      );
    }
    if (pkg === undefined || own.has(pkg.name) || skip.has(pkg.name)) continue;
    const entry = byPackage.get(pkg.name) ?? { dir: pkg.dir, files: [] };
    entry.files.push(file);
    byPackage.set(pkg.name, entry);
  }
  const found: External[] = [];
  for (const [name, { dir, files }] of byPackage) {
    const known = KNOWN_EXTERNALS[name];
    if (known !== undefined) {
      found.push({ name, reason: known });
      continue;
    }
    const binaries = files.filter((f) => f.endsWith(".node"));
    // This platform's binary, when esbuild met several (a loader that picks one by platform).
    const binary =
      binaries.find((f) => !isOtherPlatform(relative(dir, f))) ?? binaries[0] ?? (await nativeMarker(dir));
    if (binary !== undefined) {
      found.push({ name, reason: `native binary (${relative(dir, binary).split(sep).join("/")})` });
      continue;
    }
    for (const file of files) {
      if (!/\.[cm]?[jt]sx?$/.test(file)) continue;
      const match = SELF_LOCATING.exec(await readFile(file, "utf8").catch(() => ""));
      if (match !== null) {
        found.push({
          name,
          reason: `finds its own files through ${match[0]} (${relative(dir, file).split(sep).join("/")})`,
        });
        break;
      }
    }
  }
  const paths = inputs.filter((i) => !i.startsWith("<")).map((i) => resolve(cwd, i.replace(/^[a-z-]+:/, "")));
  for (const r of await findResolved(paths, cwd, skip, own)) {
    if (!found.some((f) => f.name === r.name)) found.push(r);
  }
  return found.sort((a, b) => a.name.localeCompare(b.name));
}

/** node-llama-cpp's binary packages name their platform their own way: `mac`, `win`, `armv7l`. */
const LLAMA_PLATFORMS: Readonly<Record<string, string>> = { linux: "linux", mac: "darwin", win: "win32" };
const LLAMA_ARCHS: Readonly<Record<string, string>> = {
  x64: "x64",
  arm64: "arm64",
  armv7l: "arm",
  riscv64: "riscv64",
};

/**
 * Whether a package holds only another platform's binaries, by its name: node-llama-cpp's
 * `@node-llama-cpp/<os>-<arch>[-<variant>]` (`mac-arm64-metal`, `win-x64-cuda`). npm installs
 * only this platform's optional dependencies, but a forced install or a copied node_modules can
 * hold others, hundreds of MB each. Other packages are left to npm's own os/cpu/libc filter.
 */
export function isOtherPlatformPackage(
  name: string,
  platform: string = process.platform,
  arch: string = process.arch,
): boolean {
  const llama = /^@node-llama-cpp\/([a-z]+)-([a-z0-9]+)(?:-.+)?$/.exec(name);
  if (llama === null) return false;
  const os = LLAMA_PLATFORMS[llama[1] ?? ""];
  const cpu = LLAMA_ARCHS[llama[2] ?? ""];
  return os !== platform || cpu !== arch;
}

/** What one external adds to `dist/node_modules`: its own files and those of the dependencies it brought. */
export interface ExternalSize {
  readonly name: string;
  /** Bytes copied for it. */
  readonly bytes: number;
  /** Packages copied for it (itself included). */
  readonly packages: number;
}

/** What {@link copyExternals} copied. */
export interface CopiedExternals {
  /** Packages copied (the externals and their dependencies). */
  readonly packages: number;
  /** Bytes copied. */
  readonly bytes: number;
  /** Bytes left out (every reason together). */
  readonly prunedBytes: number;
  /** Bytes left out by why, largest first. */
  readonly pruned: readonly { readonly reason: PruneReason; readonly bytes: number }[];
  /** Per external asked for, in the order asked: what it adds. A dependency two share counts for the first. */
  readonly sizes: readonly ExternalSize[];
}

/** Options of {@link copyExternals}. */
export interface CopyExternalsOptions {
  /** The project's include and exclude lists (package.json's `runlet.externalFiles`). @default none */
  readonly rules?: ExternalFileRules;
  /** Leave out source maps, docs, tests and browser builds. @default true */
  readonly prune?: boolean;
}

/**
 * Copies the externals, as installed in the project's node_modules (found from `fromDir`), and
 * their dependencies into `<outDir>/node_modules`, where the bundle's imports find them, pruned of
 * what Node never loads there (src/cli/prune-externals.ts): other platforms' binaries always,
 * source maps, docs, tests and browser builds unless `prune` is false. Symbolic links are copied
 * as links within their package and refused when they leave it (src/cli/copy-package.ts). The
 * folder is replaced whole on each build.
 */
export async function copyExternals(
  names: readonly string[],
  fromDir: string,
  outDir: string,
  options: CopyExternalsOptions = {},
): Promise<CopiedExternals> {
  const target = join(outDir, "node_modules");
  await rm(target, { recursive: true, force: true });
  if (names.length === 0) return { packages: 0, bytes: 0, prunedBytes: 0, pruned: [], sizes: [] };
  const missing = names.filter((n) => findPackageDir(n, fromDir) === undefined);
  if (missing.length > 0) {
    throw new RunletError(
      "RUNLET_BUILD_FAILED",
      `the external package${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} not installed: run npm install (externals are copied from node_modules into dist/node_modules)`,
    );
  }
  const copyOptions = { rules: options.rules ?? NO_FILE_RULES, prune: options.prune ?? true };
  const dirs = await dependencyClosure(names.map((name) => ({ name, from: fromDir })));
  // Which external each package folder is copied for: the first whose dependencies reach it.
  const owner = new Map<string, string>();
  for (const name of names) {
    for (const dir of await dependencyClosure([{ name, from: fromDir }])) {
      if (!owner.has(dir)) owner.set(dir, name);
    }
  }
  const sizes = new Map(names.map((n) => [n, { bytes: 0, packages: 0 }]));
  const pruned = new Map<PruneReason, number>();
  let bytes = 0;
  const placed = new Map<string, string>(); // name → version placed at the top of dist/node_modules
  for (const dir of dirs) {
    const m = await manifest(dir);
    const name = m.name ?? packageOf(join(dir, "x"))?.name ?? "";
    const version = m.version ?? "";
    // One copy per name at the top; a second version goes beside the package that wanted it
    // (npm nested it there too, inside the first package's own node_modules, copied with it).
    if (placed.has(name)) {
      if (placed.get(name) !== version && !dirs.some((d) => dir.startsWith(`${d}${sep}node_modules${sep}`))) {
        throw new RunletError(
          "RUNLET_BUILD_FAILED",
          `two versions of ${name} (${placed.get(name)}, ${version}) are needed by the externals; run npm dedupe or declare fewer externals`,
        );
      }
      continue;
    }
    // A package nested in another's node_modules is copied along with that one.
    if (dirs.some((d) => d !== dir && dir.startsWith(`${d}${sep}node_modules${sep}`))) continue;
    placed.set(name, version);
    const tally = await copyPackage(dir, join(target, name), name, copyOptions);
    bytes += tally.bytes;
    for (const [reason, n] of tally.pruned) pruned.set(reason, (pruned.get(reason) ?? 0) + n);
    const size = sizes.get(owner.get(dir) ?? "");
    if (size !== undefined) {
      size.bytes += tally.bytes;
      size.packages += 1;
    }
  }
  const prunedList = [...pruned]
    .map(([reason, n]) => ({ reason, bytes: n }))
    .sort((a, b) => b.bytes - a.bytes);
  return {
    packages: placed.size,
    bytes,
    prunedBytes: prunedList.reduce((sum, p) => sum + p.bytes, 0),
    pruned: prunedList,
    sizes: names.map((name) => ({ name, ...(sizes.get(name) ?? { bytes: 0, packages: 0 }) })),
  };
}
