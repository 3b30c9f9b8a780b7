import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderProjectDockerfile, WORKER_NODE_FLAGS } from "../../src/cli/dockerfile.js";
import { isOtherPlatform } from "../../src/cli/externals.js";
import { startHarness } from "../../src/harness/index.js";
import { put } from "../support/put-file.js";
import { childEnv, runCli } from "../support/run-cli.js";

// `runlet build` on a small project whose node_modules the test writes: a package with native
// binaries (fake: the .node files are never loaded, but esbuild meets them), a package that
// reads its own file through import.meta.url, one that uses __dirname, and a plain one.

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-externals-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const HERE = `${process.platform}-${process.arch}`;
const OTHER = process.platform === "win32" ? "linux-x64" : "win32-x64";

/** A project folder with the fake packages and a handler using them. */
async function project(name: string, pkg: Record<string, unknown> = {}): Promise<string> {
  const dir = join(tmp, name);
  const nm = join(dir, "node_modules");
  await put(join(dir, "package.json"), JSON.stringify({ name, type: "module", private: true, ...pkg }));
  // Native: a prebuilds/ folder per platform and a loader that picks this one (never called here).
  await put(
    join(nm, "fake-native", "package.json"),
    JSON.stringify({
      name: "fake-native",
      version: "1.0.0",
      main: "index.js",
      dependencies: { "fake-dep": "1.0.0" },
    }),
  );
  await put(
    join(nm, "fake-native", "index.js"),
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the package's own JavaScript holds the template literal
    'exports.load = () => require(`./prebuilds/${process.platform}-${process.arch}/addon.node`);\nexports.hello = () => "native " + require("fake-dep").word;\n',
  );
  for (const p of [HERE, OTHER, "darwin-arm64"])
    await put(join(nm, "fake-native", "prebuilds", p, "addon.node"), "x".repeat(1000));
  await put(
    join(nm, "fake-dep", "package.json"),
    JSON.stringify({ name: "fake-dep", version: "1.0.0", main: "index.js" }),
  );
  await put(join(nm, "fake-dep", "index.js"), 'exports.word = "dep";\n');
  // Reads its own file through import.meta.url: bundled, it would look beside the bundle.
  await put(
    join(nm, "fake-assets", "package.json"),
    JSON.stringify({ name: "fake-assets", version: "2.0.0", type: "module", exports: "./index.js" }),
  );
  await put(
    join(nm, "fake-assets", "index.js"),
    'import { readFileSync } from "node:fs";\nexport const asset = () => readFileSync(new URL("./asset.txt", import.meta.url), "utf8").trim();\n',
  );
  await put(join(nm, "fake-assets", "asset.txt"), "from the asset file\n");
  // CommonJS that finds a file through __dirname.
  await put(
    join(nm, "fake-dirname", "package.json"),
    JSON.stringify({ name: "fake-dirname", version: "3.0.0", main: "lib/index.js" }),
  );
  await put(
    join(nm, "fake-dirname", "lib", "index.js"),
    'const { readFileSync } = require("node:fs");\nconst { join } = require("node:path");\nexports.data = () => readFileSync(join(__dirname, "..", "data.txt"), "utf8").trim();\n',
  );
  await put(join(nm, "fake-dirname", "data.txt"), "beside __dirname\n");
  await put(
    join(nm, "fake-pure", "package.json"),
    JSON.stringify({ name: "fake-pure", version: "1.0.0", main: "index.js" }),
  );
  await put(join(nm, "fake-pure", "index.js"), "exports.shout = (s) => s.toUpperCase();\n");
  await put(
    join(dir, "handler.ts"),
    [
      'import { defineHandler } from "runlet";',
      'import native from "fake-native";',
      'import { asset } from "fake-assets";',
      'import dirnameUser from "fake-dirname";',
      'import pure from "fake-pure";',
      "export default defineHandler({",
      "  handler: () => ({ native: native.hello(), asset: asset(), data: dirnameUser.data(), pure: pure.shout('x'), load: typeof native.load }),",
      "});",
      "",
    ].join("\n"),
  );
  return dir;
}

/** Runs dist/ alone (copied into an empty folder, as the image's final stage) against a harness, for one job. */
async function runDistAlone(dir: string): Promise<unknown> {
  const lonely = await mkdtemp(join(tmp, "image-"));
  await cp(join(dir, "dist"), lonely, { recursive: true });
  await using harness = await startHarness({ takeTimeoutMs: 500, endpoints: [{ id: "bundle" }] });
  const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, join(lonely, "worker.mjs")], {
    cwd: lonely,
    env: { ...childEnv(), ...harness.workerEnv("bundle"), RUNPOD_ENDPOINT_ID: "bundle", NODE_PATH: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  try {
    const job = await harness.waitForJob(harness.enqueue("bundle", { input: {} }), { timeoutMs: 30_000 });
    expect(job.status, log).toBe("COMPLETED");
    child.kill("SIGTERM");
    expect(await exited, log).toBe(0);
    return job.output;
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}

describe("runlet build: what cannot be bundled", { timeout: 180_000 }, () => {
  it("finds native packages and packages that read their own files, names each and why, and runs from dist/ alone", async () => {
    const dir = await project("found");
    const r = await runCli(["build"], { cwd: dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    // Each with what it adds to dist/node_modules (fake-native brings fake-dep).
    expect(r.stdout).toMatch(
      /\nexternal: fake-assets {2}finds its own files through import\.meta\.url \(index\.js\) {2}\+\d+ B\n/,
    );
    expect(r.stdout).toMatch(
      /\nexternal: fake-dirname {2}finds its own files through __dirname \(lib\/index\.js\) {2}\+\d+ B\n/,
    );
    expect(r.stdout).toMatch(
      new RegExp(
        `\nexternal: fake-native {2}native binary \\(prebuilds/${HERE}/addon\\.node\\) {2}\\+[\\d.]+ KiB \\(2 packages\\)\n`,
      ),
    );
    expect(r.stdout).not.toContain("fake-pure");
    expect(r.stdout).toMatch(
      /\nCopied 4 packages into dist\/node_modules {2}[\d.]+ KiB \(left out 2\.0 KiB: other platforms' binaries 2\.0 KiB\)\n/,
    );
    expect(r.stdout).toContain(
      'note: list them in package.json to make the build\'s choice explicit: "runlet": {"externals": ["fake-assets","fake-dirname","fake-native"]}\n',
    );
    expect(r.stdout).not.toContain("No loader");
    const nm = join(dir, "dist", "node_modules");
    expect((await readdir(nm)).sort()).toEqual(["fake-assets", "fake-dep", "fake-dirname", "fake-native"]);
    expect(await readdir(join(nm, "fake-native", "prebuilds"))).toEqual([HERE]);
    expect(await runDistAlone(dir)).toEqual({
      native: "native dep",
      asset: "from the asset file",
      data: "beside __dirname",
      pure: "X",
      load: "function",
    });
  });

  it("reads the externals declared in package.json, and says so", async () => {
    const dir = await project("declared", { runlet: { externals: ["fake-pure", "fake-native"] } });
    const r = await runCli(["build", "--no-verify"], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /\nexternal: fake-pure {2}declared in package\.json \(runlet\.externals\) {2}\+\d+ B\n/,
    );
    expect(r.stdout).toMatch(
      /\nexternal: fake-native {2}declared in package\.json \(runlet\.externals\) {2}\+[\d.]+ KiB \(2 packages\)\n/,
    );
    expect(r.stdout).toContain(
      '"runlet": {"externals": ["fake-pure","fake-native","fake-assets","fake-dirname"]}',
    );
    expect(existsSync(join(dir, "dist", "node_modules", "fake-pure", "index.js"))).toBe(true);
    const bad = await project("bad-declared", { runlet: { externals: "fake-pure" } });
    const r2 = await runCli(["build"], { cwd: bad });
    expect(r2.code).toBe(1);
    expect(r2.stderr).toBe(
      'runlet build: package.json\'s "runlet": {"externals": ...} must be a list of package names, got "fake-pure" (RUNLET_BUILD_FAILED)\n',
    );
  });

  it("fails, saying what to change, when the existing Dockerfile would leave the externals out of the image", async () => {
    const dir = await project("dockerfile");
    // runlet's older Dockerfile installed externals apart with npm.
    await writeFile(
      join(dir, "Dockerfile"),
      `${renderProjectDockerfile()}\nRUN mkdir /externals && cd /externals && npm install sharp\n`,
    );
    const old = await runCli(["build", "--no-verify"], { cwd: dir });
    expect(old.code).toBe(1);
    expect(old.stderr).toContain('remove its "RUN mkdir /externals ..." step');
    // One that copies only the bundle file.
    await writeFile(
      join(dir, "Dockerfile"),
      renderProjectDockerfile().replace("/src/dist/ /app/", "/src/dist/worker.mjs /app/"),
    );
    const partial = await runCli(["build", "--no-verify"], { cwd: dir });
    expect(partial.code).toBe(1);
    expect(partial.stderr).toBe(
      'runlet build: the Dockerfile does not copy the whole dist/ folder into the image, so the externals in dist/node_modules (fake-assets, fake-dirname, fake-native) would be missing: give its final stage the line "COPY --from=build /src/dist/ /app/" (or delete the Dockerfile and run runlet build to write a new one; docs/images.md, "What cannot be bundled") (RUNLET_BUILD_FAILED)\n',
    );
    await writeFile(join(dir, "Dockerfile"), renderProjectDockerfile());
    expect((await runCli(["build", "--no-verify"], { cwd: dir })).code).toBe(0);
  });

  it("never shows esbuild's bare 'No loader' message for a project's own .node file", async () => {
    const dir = join(tmp, "own-addon");
    await put(join(dir, "package.json"), '{"type":"module"}');
    await put(join(dir, "addon.node"), "x");
    await put(join(dir, "handler.ts"), 'import addon from "./addon.node";\nexport default addon;\n');
    const r = await runCli(["build"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'runlet build: addon.node is a native addon, which cannot go into a bundle: load it at run time from a path outside the bundle, or install it as a package and name that package in package.json as "runlet": {"externals": [...]} (RUNLET_BUILD_FAILED)\n',
    );
    expect(existsSync(join(dir, "dist"))).toBe(false);
  });

  it("prunes what Node never loads before the verify step, so the step runs on what ships, and keeps what package.json includes", async () => {
    // A package that reads a file under docs/ through __dirname: pruned by default (docs), so the
    // verify step, which runs on the pruned dist/, fails; included in package.json, it ships.
    const dir = await project("pruned");
    const nm = join(dir, "node_modules");
    await put(join(nm, "fake-dirname", "lib", "index.js.map"), "m".repeat(4096));
    await put(join(nm, "fake-dirname", "README.md"), "r".repeat(2048));
    await put(
      join(nm, "fake-dirname", "lib", "index.js"),
      'const { readFileSync } = require("node:fs");\nconst { join } = require("node:path");\nexports.data = () => readFileSync(join(__dirname, "..", "docs", "data.txt"), "utf8").trim();\n',
    );
    await put(join(nm, "fake-dirname", "docs", "data.txt"), "beside __dirname\n");
    await put(join(dir, "test_input.json"), '{"input": {}}');
    const r = await runCli(["build"], { cwd: dir });
    expect(r.code, r.stdout).toBe(1);
    expect(r.stdout).toMatch(
      /\nCopied 4 packages into dist\/node_modules {2}[\d.]+ KiB \(left out [\d.]+ KiB: source maps 4\.0 KiB, docs 2\.0 KiB, other platforms' binaries 2\.0 KiB\)\n/,
    );
    expect(r.stderr).toContain("runlet build: the verify step (dist/ alone in an empty folder) failed:");
    expect(r.stderr).toContain("ENOENT");
    expect(r.stderr).toContain("docs/data.txt");
    expect(existsSync(join(dir, "dist", "node_modules", "fake-dirname", "lib", "index.js.map"))).toBe(false);
    const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Record<string, unknown>;
    pkg["runlet"] = { externalFiles: { include: ["fake-dirname/docs/**"] } };
    await writeFile(join(dir, "package.json"), JSON.stringify(pkg));
    const again = await runCli(["build"], { cwd: dir });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("test_input.json's job COMPLETED");
    expect(existsSync(join(dir, "dist", "node_modules", "fake-dirname", "docs", "data.txt"))).toBe(true);
    expect(existsSync(join(dir, "dist", "node_modules", "fake-dirname", "README.md"))).toBe(false);
  });

  it("points to the proxy CA fix when this machine sets NODE_EXTRA_CA_CERTS, and says nothing without it", async () => {
    const dir = await project("proxy-ca");
    const withCa = await runCli(["build", "--no-verify"], {
      cwd: dir,
      env: childEnv({ NODE_EXTRA_CA_CERTS: "/etc/proxy/ca.pem" }),
    });
    expect(withCa.code, withCa.stderr).toBe(0);
    expect(withCa.stdout).toContain(
      'note: this machine sets NODE_EXTRA_CA_CERTS=/etc/proxy/ca.pem (a proxy that re-signs TLS?): the image build\'s npm needs that CA too, or npm ci fails ("Exit handler never called!"). Pass it to the build:\n' +
        "  STORAGE_DRIVER=vfs buildah bud --isolation chroot --volume /etc/proxy/ca.pem:/run/proxy-ca.pem:ro --build-arg NODE_EXTRA_CA_CERTS=/run/proxy-ca.pem -t my-worker .\n",
    );
    const env = childEnv();
    delete env["NODE_EXTRA_CA_CERTS"];
    const without = await runCli(["build", "--no-verify"], { cwd: dir, env });
    expect(without.code, without.stderr).toBe(0);
    expect(without.stdout).not.toContain("NODE_EXTRA_CA_CERTS");
  });

  it("prunes only other platforms' binary folders", () => {
    expect(isOtherPlatform("bin/napi-v6/darwin/arm64/x.node", "linux", "x64")).toBe(true);
    expect(isOtherPlatform("bin/napi-v6/linux/arm64", "linux", "x64")).toBe(true);
    expect(isOtherPlatform("bin/napi-v6/linux/x64/libonnxruntime.so.1", "linux", "x64")).toBe(false);
    expect(isOtherPlatform("prebuilds/win32-x64/a.node", "linux", "x64")).toBe(true);
    expect(isOtherPlatform("prebuilds/linux-x64/a.glibc.node", "linux", "x64")).toBe(false);
    expect(isOtherPlatform("lib/index.js", "linux", "x64")).toBe(false);
    expect(isOtherPlatform("bin/napi-v6/linux", "linux", "x64")).toBe(false);
  });
});
