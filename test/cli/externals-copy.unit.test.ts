import { existsSync } from "node:fs";
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyExternals } from "../../src/cli/externals.js";
import {
  declaredFileRules,
  entryFiles,
  globToRegExp,
  NO_FILE_RULES,
  PackagePruner,
} from "../../src/cli/prune-externals.js";
import { put } from "../support/put-file.js";

// copyExternals on node_modules folders the test writes: symbolic links that stay inside a
// package, leave it or loop (issue 51, item 7), and what the default pruning leaves out of
// dist/node_modules (issue 54, item 1). Files and links only: no process, no socket.

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-externals-copy-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A project folder with one package `pkg` (its manifest `manifest`) holding `files`. */
async function project(
  name: string,
  files: Record<string, string>,
  manifest: Record<string, unknown> = {},
): Promise<{ dir: string; pkg: string; out: string }> {
  const dir = join(tmp, name);
  const pkg = join(dir, "node_modules", "pkg");
  await put(
    join(pkg, "package.json"),
    JSON.stringify({ name: "pkg", version: "1.0.0", main: "index.js", ...manifest }),
  );
  for (const [path, text] of Object.entries(files)) await put(join(pkg, path), text);
  return { dir, pkg, out: join(dir, "dist") };
}

/** Every path under `dir`, `/`-separated, links not followed. */
async function tree(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const e of (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const rel = `${prefix}${e.name}`;
    if (e.isDirectory()) out.push(...(await tree(join(dir, e.name), `${rel}/`)));
    else out.push(e.isSymbolicLink() ? `${rel} -> ${await readlink(join(dir, e.name))}` : rel);
  }
  return out;
}

describe("copyExternals: symbolic links inside a declared external", () => {
  it("copies a link that stays inside its package as a relative link", async () => {
    const p = await project("inside", { "index.js": "", "lib/real.js": "real\n" });
    await symlink(join(p.pkg, "lib", "real.js"), join(p.pkg, "alias.js")); // absolute, but inside
    await symlink("lib", join(p.pkg, "current"));
    await copyExternals(["pkg"], p.dir, p.out);
    const copied = join(p.out, "node_modules", "pkg");
    expect((await lstat(join(copied, "alias.js"))).isSymbolicLink()).toBe(true);
    expect(await readlink(join(copied, "alias.js"))).toBe(join("lib", "real.js"));
    expect(await readlink(join(copied, "current"))).toBe("lib");
    expect(await readFile(join(copied, "current", "real.js"), "utf8")).toBe("real\n");
  });

  it("refuses a link that leaves the package, naming it, and copies nothing it points at", async () => {
    const home = join(tmp, "home");
    await put(join(home, ".ssh", "id_rsa"), "PRIVATE KEY\n");
    const p = await project("outside", { "index.js": "" });
    await symlink(join(home, ".ssh"), join(p.pkg, "keys"));
    const err = await copyExternals(["pkg"], p.dir, p.out).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "RUNLET_BUILD_FAILED" });
    expect((err as Error).message).toBe(
      `the external pkg holds a symbolic link that leaves the package: pkg/keys -> ${join(home, ".ssh")}. ` +
        "runlet build copies links only when they stay inside their package (a link out of it would put files from elsewhere into the image). " +
        'Remove the link, or leave it out with "runlet": {"externalFiles": {"exclude": ["pkg/keys"]}} in package.json',
    );
    const left = existsSync(join(p.out, "node_modules")) ? await tree(join(p.out, "node_modules")) : [];
    expect(left.some((f) => f.includes("id_rsa"))).toBe(false);
    // A relative link climbing out is the same link.
    const q = await project("outside-relative", { "index.js": "" });
    await symlink(join("..", "..", "..", "home", ".ssh", "id_rsa"), join(q.pkg, "key"));
    await expect(copyExternals(["pkg"], q.dir, q.out)).rejects.toThrow(
      "symbolic link that leaves the package: pkg/key -> ../../../home/.ssh/id_rsa",
    );
  });

  it("leaves out a link that leaves the package when package.json excludes it", async () => {
    const p = await project("outside-excluded", { "index.js": "" });
    await symlink(join(tmp, "home"), join(p.pkg, "keys"));
    const rules = { include: [], exclude: ["pkg/keys"] };
    await copyExternals(["pkg"], p.dir, p.out, { rules });
    expect(await tree(join(p.out, "node_modules"))).toEqual(["pkg/index.js", "pkg/package.json"]);
  });

  it("stops at loops: a self-link and two links pointing at each other are copied as links, never walked", async () => {
    const p = await project("loops", { "index.js": "" });
    await symlink(".", join(p.pkg, "self"));
    await symlink("b", join(p.pkg, "a"));
    await symlink("a", join(p.pkg, "b"));
    await copyExternals(["pkg"], p.dir, p.out);
    expect(await tree(join(p.out, "node_modules"))).toEqual([
      "pkg/a -> b",
      "pkg/b -> a",
      "pkg/index.js",
      "pkg/package.json",
      "pkg/self -> .",
    ]);
  });

  it("leaves behind npm's command links that point out of the package, and keeps those inside", async () => {
    const p = await project("bin-links", {
      "index.js": "",
      "node_modules/tool/package.json": JSON.stringify({ name: "tool", version: "1.0.0" }),
      "node_modules/tool/cli.js": "",
    });
    await mkdir(join(p.pkg, "node_modules", ".bin"), { recursive: true });
    await symlink(join("..", "tool", "cli.js"), join(p.pkg, "node_modules", ".bin", "tool"));
    await symlink(
      join("..", "..", "..", "elsewhere", "cli.js"),
      join(p.pkg, "node_modules", ".bin", "other"),
    );
    await copyExternals(["pkg"], p.dir, p.out);
    expect(await tree(join(p.out, "node_modules"))).toEqual([
      "pkg/index.js",
      "pkg/node_modules/.bin/tool -> ../tool/cli.js",
      "pkg/node_modules/tool/cli.js",
      "pkg/node_modules/tool/package.json",
      "pkg/package.json",
    ]);
  });

  it("copies a package whose own folder is a link (a workspace) from where it points", async () => {
    const dir = join(tmp, "workspace");
    await put(
      join(dir, "packages", "pkg", "package.json"),
      JSON.stringify({ name: "pkg", version: "1.0.0" }),
    );
    await put(join(dir, "packages", "pkg", "index.js"), "module.exports = 1;\n");
    await mkdir(join(dir, "node_modules"), { recursive: true });
    await symlink(join("..", "packages", "pkg"), join(dir, "node_modules", "pkg"));
    await copyExternals(["pkg"], dir, join(dir, "dist"));
    expect(await tree(join(dir, "dist", "node_modules"))).toEqual(["pkg/index.js", "pkg/package.json"]);
  });
});

describe("copyExternals: what the image leaves out", () => {
  const files = {
    "index.js": "main",
    "index.js.map": "m".repeat(100),
    "README.md": "r".repeat(10),
    LICENSE: "license",
    "docs/guide.html": "d".repeat(20),
    "test/index.test.js": "t".repeat(30),
    "lib/util.js": "util",
    "lib/util.spec.ts": "s".repeat(5),
    "dist/pkg.node.js": "node build",
    "dist/pkg.min.js": "b".repeat(40),
    "dist/pkg.js": "b".repeat(41),
    "dist/pkg.es2017.min.js": "b".repeat(42),
    "dist/pkg.min.js.html": "b".repeat(43),
    "dist/other.js": "kept",
    "test/entry.js": "an entry point in a tests folder",
    "prebuilds/win32-x64/a.node": "w".repeat(50),
    "node_modules/nested/package.json": JSON.stringify({ name: "nested", version: "1.0.0" }),
    "node_modules/nested/index.js": "nested",
    "node_modules/nested/index.js.map": "n".repeat(60),
  };
  const manifest = {
    main: "dist/pkg.node.js",
    unpkg: "dist/pkg.min.js",
    exports: {
      ".": { browser: "./dist/pkg.min.js", node: "./dist/pkg.node.js" },
      "./test-entry": "./test/entry.js",
    },
  };

  it("leaves out source maps, docs, tests and browser builds, keeps the entry points, licenses and the rest, and says how much of each", async () => {
    const p = await project("prune", files, manifest);
    const copied = await copyExternals(["pkg"], p.dir, p.out);
    expect(await tree(join(p.out, "node_modules"))).toEqual([
      "pkg/LICENSE",
      "pkg/dist/other.js",
      "pkg/dist/pkg.node.js",
      "pkg/index.js",
      "pkg/lib/util.js",
      "pkg/node_modules/nested/index.js",
      "pkg/node_modules/nested/package.json",
      "pkg/package.json",
      "pkg/test/entry.js",
    ]);
    expect(copied.pruned).toEqual([
      { reason: "browser builds", bytes: 40 + 41 + 42 + 43 },
      { reason: "source maps", bytes: 160 },
      { reason: "other platforms' binaries", bytes: 50 },
      { reason: "tests", bytes: 35 },
      { reason: "docs", bytes: 30 },
    ]);
    expect(copied.prunedBytes).toBe(166 + 160 + 50 + 35 + 30);
    expect(copied.sizes).toEqual([{ name: "pkg", bytes: copied.bytes, packages: 1 }]);
  });

  it("keeps a browser build's twin that the package's own code loads by name", async () => {
    // seedrandom's shape: unpkg names seedrandom.min.js, and index.js requires ./seedrandom.
    const p = await project(
      "browser-twin",
      {
        "index.js": "module.exports = require('./seedy');\n",
        "seedy.js": "twin",
        "seedy.min.js": "b".repeat(9),
      },
      { unpkg: "seedy.min.js" },
    );
    const copied = await copyExternals(["pkg"], p.dir, p.out);
    expect(await tree(join(p.out, "node_modules"))).toEqual([
      "pkg/index.js",
      "pkg/package.json",
      "pkg/seedy.js",
    ]);
    expect(copied.pruned).toEqual([{ reason: "browser builds", bytes: 9 }]);
  });

  it("keeps what package.json includes and drops what it excludes; --no-prune keeps all but other platforms' binaries", async () => {
    const p = await project("prune-rules", files, manifest);
    const rules = await declaredFileRules(p.dir); // none declared yet
    expect(rules).toEqual({ include: [], exclude: [] });
    await put(
      join(p.dir, "package.json"),
      JSON.stringify({
        runlet: {
          externalFiles: { include: ["pkg/docs/**", "pkg/index.js.map"], exclude: ["pkg/lib/*.js"] },
        },
      }),
    );
    await copyExternals(["pkg"], p.dir, p.out, { rules: await declaredFileRules(p.dir) });
    const kept = await tree(join(p.out, "node_modules"));
    expect(kept).toContain("pkg/docs/guide.html");
    expect(kept).toContain("pkg/index.js.map");
    expect(kept).not.toContain("pkg/lib/util.js");
    await copyExternals(["pkg"], p.dir, p.out, { prune: false });
    const whole = await tree(join(p.out, "node_modules"));
    expect(whole).toContain("pkg/README.md");
    expect(whole).toContain("pkg/node_modules/nested/index.js.map");
    expect(whole.some((f) => f.includes("win32-x64"))).toBe(false);
  });

  it("names each external's size with the dependencies it brought", async () => {
    const dir = join(tmp, "sizes");
    const nm = join(dir, "node_modules");
    const pkg = (name: string, deps: Record<string, string>, bytes: number) =>
      Promise.all([
        put(join(nm, name, "package.json"), JSON.stringify({ name, version: "1.0.0", dependencies: deps })),
        put(join(nm, name, "index.js"), "x".repeat(bytes)),
      ]);
    await pkg("big", { shared: "1" }, 1000);
    await pkg("small", { shared: "1" }, 10);
    await pkg("shared", {}, 100);
    const copied = await copyExternals(["small", "big"], dir, join(dir, "dist"));
    const manifestBytes = (name: string, deps: Record<string, string>) =>
      JSON.stringify({ name, version: "1.0.0", dependencies: deps }).length;
    expect(copied.sizes).toEqual([
      {
        name: "small",
        bytes: 10 + manifestBytes("small", { shared: "1" }) + 100 + manifestBytes("shared", {}),
        packages: 2,
      },
      { name: "big", bytes: 1000 + manifestBytes("big", { shared: "1" }), packages: 1 },
    ]);
  });

  it("refuses a malformed include or exclude list, naming the entry", async () => {
    const dir = join(tmp, "bad-rules");
    await put(
      join(dir, "package.json"),
      JSON.stringify({ runlet: { externalFiles: { include: ["../x"] } } }),
    );
    await expect(declaredFileRules(dir)).rejects.toThrow(
      '"include" entries are "<package>/<glob>" (such as "@tensorflow/tfjs/dist/tf.min.js" or "sharp/docs/**"), got "../x"',
    );
    await put(join(dir, "package.json"), JSON.stringify({ runlet: { externalFiles: { keep: [] } } }));
    await expect(declaredFileRules(dir)).rejects.toThrow('takes "include" and "exclude", got "keep"');
  });

  it("reads a package's entry points as Node does", () => {
    expect(globToRegExp("docs/**").test("docs/a/b.md")).toBe(true);
    expect(globToRegExp("lib/*.js").test("lib/a/b.js")).toBe(false);
    const e = entryFiles({
      main: "lib/index",
      browser: { "./lib/node.js": "./lib/browser.js" },
      exports: { ".": { "react-native": "./rn.js", import: "./esm/index.js", default: "./lib/index.js" } },
    });
    expect([...e.browser].sort()).toEqual(["lib/browser.js", "rn.js"]);
    expect(e.nodeFiles.has("lib/index.js")).toBe(true);
    expect(e.nodeFiles.has("esm/index.js")).toBe(true);
    expect(e.nodeFiles.has("lib/node.js")).toBe(true);
  });
});

describe("PackagePruner: code is never pruned by its name alone (issue 54 review)", () => {
  // A manifest naming no browser build: create() reads no file, so the folder need not exist.
  const pruner = () =>
    PackagePruner.create(join(tmp, "absent"), { name: "pkg", main: "index.js" }, NO_FILE_RULES, true);

  it("keeps code files named like docs, and still drops the docs themselves", async () => {
    const p = await pruner();
    for (const rel of [
      "lib/history.js",
      "lib/security.js",
      "lib/changes.cjs",
      "lib/readme.mjs",
      "dist/authors.json",
      "lib/contributing.node",
      "lib/changelog.wasm",
    ]) {
      expect(p.reason(rel, false), rel).toBeUndefined();
    }
    for (const rel of [
      "README",
      "README.md",
      "CHANGELOG.markdown",
      "HISTORY.txt",
      "SECURITY.rst",
      "authors.html",
      "lib/guide.md",
    ]) {
      expect(p.reason(rel, false), rel).toBe("docs");
    }
  });

  it("keeps code in a tests or examples folder below the package root; drops such folders at the root", async () => {
    const p = await pruner();
    expect(p.reason("lib/examples/loader.js", false)).toBeUndefined();
    expect(p.reason("lib/test/helpers.js", false)).toBeUndefined();
    expect(p.reason("dist/docs/index.cjs", false)).toBeUndefined();
    expect(p.reason("lib/test", true)).toBeUndefined();
    expect(p.reason("lib/examples", true)).toBeUndefined();
    expect(p.reason("test", true)).toBe("tests");
    expect(p.reason("examples", true)).toBe("docs");
    expect(p.reason("test/helpers.js", false)).toBe("tests");
    // Names that are never code folders go at any depth.
    expect(p.reason("src/__tests__", true)).toBe("tests");
    expect(p.reason("lib/.github", true)).toBe("docs");
    // A test file by its name: TypeScript sources go, JavaScript Node could load stays.
    expect(p.reason("lib/util.spec.ts", false)).toBe("tests");
    expect(p.reason("lib/util.test.js", false)).toBeUndefined();
  });
});
