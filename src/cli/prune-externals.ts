import type { Dirent } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { RunletError } from "../errors.js";

/**
 * What `runlet build` leaves out of the externals it copies into `dist/node_modules`
 * (docs/images.md, "What the image leaves out"): files Node never loads in a worker. Source maps,
 * docs, tests, browser builds the package's own manifest names as such, and other platforms'
 * binaries. A file a package's Node entry points name (`main`, `exports` under Node's conditions)
 * is always kept, and so are `package.json` and license files. A project adds to or takes from
 * the rules per package in package.json: `"runlet": {"externalFiles": {"include": [...],
 * "exclude": [...]}}`, each entry `<package>/<glob>`.
 */

const PLATFORMS = new Set([
  "aix",
  "android",
  "darwin",
  "freebsd",
  "linux",
  "linuxmusl",
  "openbsd",
  "sunos",
  "win32",
]);
const ARCHS = new Set([
  "arm",
  "arm64",
  "ia32",
  "loong64",
  "mips",
  "mipsel",
  "ppc64",
  "riscv64",
  "s390x",
  "x64",
  "wasm32",
]);

/**
 * Whether a path inside a package holds another platform's binaries: `<os>/<arch>` folder pairs
 * (onnxruntime-node's `bin/napi-v6/darwin/arm64`) and `<os>-<arch>` folders (node-gyp-build's
 * `prebuilds/win32-x64`). Anything else is kept.
 */
export function isOtherPlatform(
  relPath: string,
  platform: string = process.platform,
  arch: string = process.arch,
): boolean {
  const parts = relPath.split(/[\\/]/);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? "";
    const next = parts[i + 1];
    if (PLATFORMS.has(part) && next !== undefined && ARCHS.has(next)) {
      if (part !== platform || next !== arch) return true;
    }
    const dash = /^([a-z0-9]+)-([a-z0-9]+)(?:[-.].*)?$/.exec(part);
    if (dash !== null && PLATFORMS.has(dash[1] ?? "") && ARCHS.has(dash[2] ?? "")) {
      if (dash[1] !== platform || dash[2] !== arch) return true;
    }
  }
  return false;
}

/** The package.json key of the include and exclude lists. */
export const EXTERNAL_FILES_KEY = "runlet.externalFiles";

/** Why a file was left out; the build prints the bytes of each. */
export type PruneReason =
  | "source maps"
  | "docs"
  | "tests"
  | "browser builds"
  | "other platforms' binaries"
  | "excluded in package.json";

/** A project's include and exclude lists, each entry a package name and a glob inside it. */
export interface ExternalFileRules {
  readonly include: readonly string[];
  readonly exclude: readonly string[];
}

export const NO_FILE_RULES: ExternalFileRules = { include: [], exclude: [] };

const PACKAGE_PREFIX = /^(@[a-z0-9][\w.-]*\/[a-z0-9][\w.-]*|[a-z0-9][\w.-]*)\/(.+)$/i;

/** Most entries each list takes (a bound on the work per file). */
const MAX_RULES = 200;

/**
 * The include and exclude lists a project declares in package.json, or empty lists without
 * them. A malformed field is an error naming it and the entry.
 */
export async function declaredFileRules(projectDir: string): Promise<ExternalFileRules> {
  let pkg: { runlet?: { externalFiles?: unknown } };
  try {
    pkg = JSON.parse(await readFile(join(projectDir, "package.json"), "utf8")) as typeof pkg;
  } catch {
    return NO_FILE_RULES; // No package.json, or one declaredExternals already called malformed.
  }
  const value = pkg.runlet?.externalFiles;
  if (value === undefined) return NO_FILE_RULES;
  const bad = (why: string) =>
    new RunletError("RUNLET_BUILD_FAILED", `package.json's "runlet": {"externalFiles": ...} ${why}`);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw bad(
      `must be an object {"include": [...], "exclude": [...]}, got ${JSON.stringify(value).slice(0, 200)}`,
    );
  }
  const lists: Record<string, string[]> = {};
  for (const [key, list] of Object.entries(value)) {
    if (key !== "include" && key !== "exclude") throw bad(`takes "include" and "exclude", got "${key}"`);
    if (!Array.isArray(list) || list.length > MAX_RULES) {
      throw bad(`"${key}" must be a list of at most ${MAX_RULES} entries`);
    }
    for (const entry of list) {
      if (typeof entry !== "string" || !PACKAGE_PREFIX.test(entry) || entry.includes("..")) {
        throw bad(
          `"${key}" entries are "<package>/<glob>" (such as "@tensorflow/tfjs/dist/tf.min.js" or "sharp/docs/**"), got ${JSON.stringify(entry).slice(0, 200)}`,
        );
      }
    }
    lists[key] = list as string[];
  }
  return { include: lists["include"] ?? [], exclude: lists["exclude"] ?? [] };
}

/** A glob as a regular expression over a path with `/` separators: `**` any folders, `*` and `?` within one. */
export function globToRegExp(glob: string): RegExp {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string;
    if (c === "*" && glob[i + 1] === "*") {
      const slash = glob[i + 2] === "/";
      out += slash ? "(?:.*/)?" : ".*";
      i += slash ? 2 : 1;
    } else if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else out += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${out}(?:/.*)?$`);
}

/** One package's rules, compiled: globs relative to the package's folder. */
interface PackageRules {
  readonly include: readonly RegExp[];
  /** The literal heads of the include globs: a folder on the way to one is walked, not dropped whole. */
  readonly includeHeads: readonly string[];
  readonly exclude: readonly RegExp[];
}

function compileFor(name: string, rules: ExternalFileRules): PackageRules {
  const mine = (list: readonly string[]) =>
    list.filter((e) => PACKAGE_PREFIX.exec(e)?.[1] === name).map((e) => PACKAGE_PREFIX.exec(e)?.[2] ?? "");
  const include = mine(rules.include);
  return {
    include: include.map(globToRegExp),
    includeHeads: include.map((g) => g.split(/[*?]/)[0] ?? ""),
    exclude: mine(rules.exclude).map(globToRegExp),
  };
}

/** The manifest fields that say where a package's code is. */
export interface EntryManifest {
  readonly name?: string;
  readonly main?: unknown;
  readonly exports?: unknown;
  readonly browser?: unknown;
  readonly unpkg?: unknown;
  readonly jsdelivr?: unknown;
  readonly "umd:main"?: unknown;
  readonly miniprogram?: unknown;
}

/** The conditions Node (or a loader Node runs under) may match in `exports`. */
const NODE_CONDITIONS = new Set([
  "node",
  "import",
  "require",
  "default",
  "module-sync",
  "node-addons",
  "production",
  "development",
  "types",
]);

/** Conditions that name builds for somewhere else than Node. */
const NON_NODE_CONDITIONS = new Set([
  "browser",
  "react-native",
  "deno",
  "bun",
  "worker",
  "workerd",
  "electron",
]);

/** `./dist/x.js` → `dist/x.js`; undefined for what is not a path in the package. */
function packagePath(target: unknown): string | undefined {
  if (typeof target !== "string" || target.includes("..")) return undefined;
  const t = target.replace(/^\.\//, "").replace(/^\//, "");
  return t === "" || t === "." ? undefined : t;
}

/** The files Node may load through the package's entry points, and those its manifest names for browsers only. */
export function entryFiles(m: EntryManifest): {
  node: RegExp[];
  nodeFiles: Set<string>;
  browser: Set<string>;
} {
  const nodeFiles = new Set<string>();
  const node: RegExp[] = [];
  const browser = new Set<string>();
  const addNode = (target: string) => {
    if (target.includes("*")) node.push(globToRegExp(target.replaceAll("*", "**")));
    else {
      nodeFiles.add(target);
      // `main: "lib"` or `main: "index"` resolves with an extension or to an index file.
      for (const ext of [".js", ".cjs", ".mjs", ".json", ".node", "/index.js", "/index.cjs", "/index.json"]) {
        nodeFiles.add(target.replace(/\/$/, "") + ext);
      }
    }
  };
  const main = packagePath(m.main);
  if (main !== undefined) addNode(main);
  else nodeFiles.add("index.js");
  const walk = (value: unknown, forNode: boolean) => {
    if (Array.isArray(value)) for (const v of value) walk(v, forNode);
    else if (typeof value === "string") {
      const p = packagePath(value);
      if (p === undefined) return;
      if (forNode) addNode(p);
      else if (!p.includes("*")) browser.add(p);
    } else if (typeof value === "object" && value !== null) {
      for (const [key, v] of Object.entries(value)) {
        // A subpath key (".", "./x") keeps the branch as it is; a condition narrows it.
        const next = key.startsWith(".") ? forNode : forNode && NODE_CONDITIONS.has(key);
        if (!key.startsWith(".") && !NODE_CONDITIONS.has(key) && !NON_NODE_CONDITIONS.has(key)) {
          // An unknown condition (a bundler's own): the files it names are kept.
          walk(v, forNode);
        } else walk(v, next);
      }
    }
  };
  walk(m.exports, true);
  const browserField = m.browser;
  if (typeof browserField === "string") {
    const p = packagePath(browserField);
    if (p !== undefined) browser.add(p);
  } else if (typeof browserField === "object" && browserField !== null) {
    // The keys are what Node loads; the values are their browser replacements.
    for (const [key, v] of Object.entries(browserField)) {
      const k = packagePath(key);
      if (k !== undefined) nodeFiles.add(k);
      const p = packagePath(v);
      if (p !== undefined) browser.add(p);
    }
  }
  for (const field of [m.unpkg, m.jsdelivr, m["umd:main"], m.miniprogram]) {
    const p = packagePath(field);
    if (p !== undefined) browser.add(p);
  }
  for (const f of nodeFiles) browser.delete(f);
  for (const f of [...browser]) if (node.some((r) => r.test(f))) browser.delete(f);
  return { node, nodeFiles, browser };
}

/**
 * Folders of docs and tests (`spec/` is left alone: some packages keep run-time data under that
 * name). `ROOT_` ones only at the package's root: below it (`lib/test/helpers.js`,
 * `lib/examples/loader.js`) the name may be code's own folder. The others are never code's.
 */
const ROOT_DOC_DIRS = new Set(["docs", "doc", "example", "examples"]);
const ROOT_TEST_DIRS = new Set(["test", "tests", "benchmark", "benchmarks"]);
const DOC_DIRS = new Set([".github"]);
const TEST_DIRS = new Set(["__tests__", "__mocks__", "coverage"]);
/** A doc's name (`README`, `HISTORY.md`, `CHANGES.rst`); only with no extension or a doc's one (see {@link isDocFile}). */
const DOC_NAME =
  /^(?:readme|changelog|changes|history|contributing|code_of_conduct|security|authors)(?:[.\-_]|$)/i;
const DOC_EXTENSION = /\.(?:md|markdown|txt|rst|html)$/i;
/** A test file by its name: TypeScript sources and JSX only, never JavaScript Node could load. */
const TEST_FILE = /\.(?:test|spec)\.(?:[cm]?ts|[jt]sx)$/;
/** Files Node loads: never left out for their name alone (`lib/history.js`, `dist/authors.json`). */
const CODE_FILE = /\.(?:[cm]?js|json|node|wasm)$/i;

/** Whether the file named `base` is a doc by its name: any `.md`, or a doc's name with no extension or a doc's extension. */
function isDocFile(base: string): boolean {
  if (CODE_FILE.test(base)) return false;
  if (/\.(?:md|markdown)$/i.test(base)) return true;
  return DOC_NAME.test(base) && (!base.includes(".") || DOC_EXTENSION.test(base));
}

/**
 * The other formats of a browser build, beside it under the same name: `tf.min.js` named by
 * `unpkg` goes with `tf.js`, `tf.es2017.js`, `tf.fesm.min.js` and the size report
 * `tf.min.js.html`, not with `tf.node.js` (which the entry points name, and so keep).
 */
const BUILD_VARIANT = /^(?:(?:min|es\d+|esm|fesm|umd|iife|browser|global|bundle)\.)*(?:[cm]?js)(?:\.html)?$/;

/** Whether `rel` is another format of one of the browser builds in `browser`. */
function isBrowserVariant(rel: string, browser: ReadonlySet<string>): boolean {
  const slash = rel.lastIndexOf("/");
  const dir = rel.slice(0, slash + 1);
  const base = rel.slice(slash + 1);
  for (const b of browser) {
    const bSlash = b.lastIndexOf("/");
    if (b.slice(0, bSlash + 1) !== dir) continue;
    const stem = b.slice(bSlash + 1).split(".")[0] ?? "";
    if (stem !== "" && base.startsWith(`${stem}.`) && BUILD_VARIANT.test(base.slice(stem.length + 1)))
      return true;
  }
  return false;
}

/** Most files of one package read to find its browser builds (a bound on the work). */
const MAX_SCANNED_FILES = 20_000;

/** A package's files, `/`-separated, its own node_modules left out (links not followed). */
async function packageFiles(dir: string, rel = "", out: string[] = []): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = await readdir(join(dir, rel), { withFileTypes: true });
  } catch {
    return out; // Unreadable: nothing of it is judged a browser build.
  }
  for (const e of entries) {
    if (out.length >= MAX_SCANNED_FILES) break;
    const path = rel === "" ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory() && e.name !== "node_modules") await packageFiles(dir, path, out);
    else if (e.isFile()) out.push(path);
  }
  return out;
}

/** Whether `code` names the file `rel` as a path ends: `./seedrandom`, `"tf.min.js"`, `/tf.min"`. */
function namesFile(code: string, rel: string): boolean {
  const base = rel.slice(rel.lastIndexOf("/") + 1);
  const stem = base.replace(/\.[cm]?js$/, "");
  for (const name of new Set([base, stem])) {
    for (const before of ["/", '"', "'", "`"]) {
      for (const after of ['"', "'", "`"]) if (code.includes(`${before}${name}${after}`)) return true;
    }
  }
  return false;
}

/**
 * Decides, file by file and folder by folder, what of one package is copied. Made per package
 * folder (a package nested in another's node_modules gets its own).
 */
export class PackagePruner {
  readonly #rules: PackageRules;
  readonly #entries: ReturnType<typeof entryFiles>;
  readonly #enabled: boolean;
  /** The browser builds to leave out: named or their variants, and loaded by none of the package's other code. */
  readonly #browser: ReadonlySet<string>;

  private constructor(
    manifest: EntryManifest,
    rules: ExternalFileRules,
    enabled: boolean,
    browser: ReadonlySet<string>,
  ) {
    this.#rules = compileFor(manifest.name ?? "", rules);
    this.#entries = entryFiles(manifest);
    this.#enabled = enabled;
    this.#browser = browser;
  }

  /**
   * The pruner of the package in `dir`. Its browser builds are found by the names its manifest
   * gives, then checked against the package's other code: a file another one loads by its name
   * (seedrandom's `index.js` requires `./seedrandom`, beside the `seedrandom.min.js` that `unpkg`
   * names) is kept.
   */
  static async create(
    dir: string,
    manifest: EntryManifest,
    rules: ExternalFileRules,
    enabled: boolean,
  ): Promise<PackagePruner> {
    const entries = entryFiles(manifest);
    const browser = new Set<string>();
    if (enabled && entries.browser.size > 0) {
      const files = await packageFiles(dir);
      const candidates = files.filter(
        (f) => !entries.nodeFiles.has(f) && (entries.browser.has(f) || isBrowserVariant(f, entries.browser)),
      );
      const loaders = files.filter((f) => /\.[cm]?js$/.test(f) && !candidates.includes(f));
      const wanted = new Set(candidates);
      for (const f of loaders) {
        if (wanted.size === 0) break;
        const text = await readFile(join(dir, f), "utf8").catch(() => "");
        for (const c of wanted) if (namesFile(text, c)) wanted.delete(c);
      }
      for (const c of wanted) browser.add(c);
    }
    return new PackagePruner(manifest, rules, enabled, browser);
  }

  /** Whether a path the package's Node entry points name is `rel` or lies under it. */
  #holdsEntry(rel: string, isDir: boolean): boolean {
    if (this.#entries.nodeFiles.has(rel) || this.#entries.node.some((r) => r.test(rel))) return true;
    if (!isDir) return false;
    const prefix = `${rel}/`;
    for (const f of this.#entries.nodeFiles) if (f.startsWith(prefix)) return true;
    return false;
  }

  /**
   * Why `rel` (a path inside the package, `/`-separated) is left out, or undefined to copy it. A
   * folder with something included below it is walked (undefined), its files then judged one by
   * one.
   */
  reason(rel: string, isDir: boolean): PruneReason | undefined {
    const included = this.#rules.include.some((r) => r.test(rel));
    if (included) return undefined;
    if (isDir && this.#rules.includeHeads.some((h) => h === "" || h.startsWith(`${rel}/`))) return undefined;
    // Other platforms' binaries go even with pruning off: a worker cannot load them.
    if (isOtherPlatform(rel)) return "other platforms' binaries";
    if (this.#rules.exclude.some((r) => r.test(rel))) return "excluded in package.json";
    if (!this.#enabled || rel === "package.json" || this.#holdsEntry(rel, isDir)) return undefined;
    const parts = rel.split("/");
    const base = parts.at(-1) ?? "";
    if (/^(?:licen[cs]e|notice|copying)(?:\.|$)/i.test(base)) return undefined;
    // A docs or tests folder, or a file under one (walked because something in it is included).
    for (let i = 0; i < (isDir ? parts.length : parts.length - 1); i++) {
      const part = parts[i] ?? "";
      if (DOC_DIRS.has(part) || (i === 0 && ROOT_DOC_DIRS.has(part))) return "docs";
      if (TEST_DIRS.has(part) || (i === 0 && ROOT_TEST_DIRS.has(part))) return "tests";
    }
    if (isDir)
      return this.#entries.browser.has(rel) && !this.#holdsEntry(rel, true) ? "browser builds" : undefined;
    if (base.endsWith(".map")) return "source maps";
    if (isDocFile(base)) return "docs";
    if (TEST_FILE.test(base)) return "tests";
    if (this.#browser.has(rel)) return "browser builds";
    return undefined;
  }
}
