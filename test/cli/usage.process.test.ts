import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderProjectDockerfile } from "../../src/cli/dockerfile.js";
import { TEMPLATE_NAMES } from "../../src/cli/paths.js";
import { REPO_ROOT, runCli } from "../support/run-cli.js";

/** The commands this area owns; each must answer --help with its usage and exit 0. */
const OWN_COMMANDS = ["init", "dev", "test", "build"] as const;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-cli-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("runlet --version", () => {
  it("prints package.json's version and exits 0", async () => {
    const pkg = JSON.parse(await readFile(join(REPO_ROOT, "package.json"), "utf8")) as { version: string };
    const r = await runCli(["--version"]);
    expect(r).toMatchObject({ code: 0, stdout: `${pkg.version}\n`, stderr: "" });
  });
});

describe("runlet --help", () => {
  it("lists every command with its summary and exits 0", async () => {
    const r = await runCli(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^runlet \d+\.\d+\.\d+: /);
    for (const name of OWN_COMMANDS) expect(r.stdout).toMatch(new RegExp(`^  ${name} +\\S`, "m"));
  });

  for (const name of OWN_COMMANDS) {
    it(`answers \`runlet ${name} --help\` with its usage on stdout and exit 0`, async () => {
      const r = await runCli([name, "--help"]);
      expect(r.code).toBe(0);
      expect(r.stdout.startsWith(`Usage: runlet ${name}`)).toBe(true);
      expect(r.stdout).toContain("Exit codes:");
      expect(r.stderr).toBe("");
    });
  }
});

describe("bad usage", () => {
  for (const name of OWN_COMMANDS) {
    it(`exits 2 with a one-line reason and no stack trace for an unknown flag to ${name}`, async () => {
      const r = await runCli([name, "--no-such-flag"]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(
        new RegExp(
          `^runlet ${name}: Unknown option '--no-such-flag'\\.[^\\n]* \\(RUNLET_CLI_USAGE\\)\\nRun \`runlet ${name} --help\` for usage\\.\\n$`,
        ),
      );
      expect(r.stderr).not.toMatch(/\n\s+at /);
    });
  }

  for (const name of ["dev", "test", "build"] as const) {
    it(`exits 2 naming the file when ${name} is given a handler that does not exist`, async () => {
      const r = await runCli([name, "nope/handler.ts"], { cwd: tmp });
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(`runlet ${name}: handler file not found: nope/handler.ts (RUNLET_CLI_USAGE)\n`);
    });

    it(`exits 2 listing where it looked when ${name} gets no handler and finds none`, async () => {
      const r = await runCli([name], { cwd: tmp });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        `runlet ${name}: no handler given and none found (looked for src/handler.ts,`,
      );
      expect(r.stderr).not.toMatch(/\n\s+at /);
    });
  }

  it("exits 2 for an unknown command", async () => {
    const r = await runCli(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'runlet: unknown command "frobnicate" (RUNLET_CLI_USAGE)\nRun `runlet --help` for the list.\n',
    );
  });
});

/** A stand-in for runlet's tarball: init copies it and never opens it. */
async function fakeTarball(): Promise<string> {
  const path = join(tmp, "packed", "runlet-0.1.0.tgz");
  await mkdir(join(tmp, "packed"), { recursive: true });
  await writeFile(path, "not really a tarball: runlet init only copies it");
  return path;
}

/** A folder npm packs as runlet 9.9.9 (two files), with the given scripts. */
async function fakeRunletFolder(name: string, scripts: Record<string, string>): Promise<string> {
  const folder = join(tmp, name);
  await mkdir(folder, { recursive: true });
  await writeFile(
    join(folder, "package.json"),
    JSON.stringify({ name: "runlet", version: "9.9.9", files: ["index.js"], scripts }),
  );
  await writeFile(join(folder, "index.js"), "export {};\n");
  return folder;
}

/** The entries of a .tgz, through tar. */
async function runTar(file: string): Promise<string[]> {
  const { execFile } = await import("node:child_process");
  const { promisify } = await import("node:util");
  const { stdout } = await promisify(execFile)("tar", ["-tzf", file]);
  return stdout.split("\n").filter((l) => l !== "");
}

describe("runlet init", () => {
  it("refuses a folder that is not empty and leaves it untouched", async () => {
    // One file of the user's: the message lists the first few entries, so a folder that a
    // starter already filled (more files than that) would leave mine.txt out of it.
    const dir = join(tmp, "taken");
    await mkdir(dir);
    await writeFile(join(dir, "mine.txt"), "keep me");
    const before = (await readdir(dir)).sort();
    const r = await runCli(["init", dir]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /is not empty \(.*mine\.txt.*\); choose a new or empty folder \(RUNLET_CLI_USAGE\)\n$/,
    );
    expect((await readdir(dir)).sort()).toEqual(before);
  });

  it("refuses an unknown template", async () => {
    const r = await runCli(["init", join(tmp, "x"), "--template", "gpu"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `runlet init: unknown template "gpu"; choose one of ${TEMPLATE_NAMES.join(", ")} (RUNLET_CLI_USAGE)\n`,
    );
  });

  it("copies the tarball --runlet-from names into vendor/ and depends on it there", async () => {
    const tarball = await fakeTarball();
    const r = await runCli(["init", join("apps", "w"), "--runlet-from", tarball], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      `\nIts runlet dependency is file:vendor/runlet-0.1.0.tgz (a copy of ${tarball}); commit vendor/ with the project: npm install and the Dockerfile install runlet from it.\n\nNext:\n  cd apps/w\n`,
    );
    const pkg = JSON.parse(await readFile(join(tmp, "apps", "w", "package.json"), "utf8")) as Record<
      string,
      unknown
    >;
    expect(pkg["dependencies"]).toEqual({ runlet: "file:vendor/runlet-0.1.0.tgz", zod: "^4.1.0" });
    expect(await readFile(join(tmp, "apps", "w", "vendor", "runlet-0.1.0.tgz"), "utf8")).toBe(
      await readFile(tarball, "utf8"),
    );
  });

  it("packs the folder --runlet-from names into vendor/ with npm pack", async () => {
    const folder = await fakeRunletFolder("packable", {});
    const dir = join(tmp, "from-folder");
    const r = await runCli(["init", dir, "--runlet-from", folder], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      `Its runlet dependency is file:vendor/runlet-9.9.9.tgz (packed from ${folder});`,
    );
    const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Record<string, unknown>;
    expect(pkg["dependencies"]).toMatchObject({ runlet: "file:vendor/runlet-9.9.9.tgz" });
    const listing = await runTar(join(dir, "vendor", "runlet-9.9.9.tgz"));
    expect(listing.sort()).toEqual(["package/index.js", "package/package.json"]);
  }, 120_000);

  it("fails with RUNLET_CLI_VENDOR_FAILED and npm's words when npm pack fails, leaving no vendor/", async () => {
    const folder = await fakeRunletFolder("unpackable", {
      prepack: "node -e \"console.error('no build here'); process.exit(3)\"",
    });
    const dir = join(tmp, "from-broken-folder");
    const r = await runCli(["init", dir, "--runlet-from", folder], { timeoutMs: 120_000 });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^runlet init: npm pack ${folder} exited with 3`));
    expect(r.stderr).toContain("no build here");
    expect(r.stderr).toContain("runlet init --runlet-from ./runlet-");
    expect(r.stderr).toMatch(/\(RUNLET_CLI_VENDOR_FAILED\)\n$/);
    expect(await readdir(dir)).toEqual([]);
  }, 120_000);

  it("quotes the folder in its cd line when it holds a space", async () => {
    const r = await runCli(["init", "My Cool Worker", "--runlet-from", await fakeTarball()], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("\nNext:\n  cd 'My Cool Worker'\n  npm install\n");
  });

  it("refuses a --runlet-from path that is neither a runlet folder nor a tarball, writing nothing", async () => {
    const r = await runCli(["init", join(tmp, "never"), "--runlet-from", tmp]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `runlet init: --runlet-from ${tmp}: not a runlet folder (its package.json must be named "runlet") (RUNLET_CLI_USAGE)\n`,
    );
    await expect(readdir(join(tmp, "never"))).rejects.toThrow("ENOENT");
  });

  for (const template of ["basic", "stream", "s3", "openai", "batch"] as const) {
    it(`copies the ${template} starter with the project name filled in`, async () => {
      const dir = join(tmp, `My Worker ${template}`);
      const r = await runCli(["init", dir, "--template", template, "--runlet-from", await fakeTarball()]);
      expect(r.code, r.stderr).toBe(0);
      const files = (await readdir(dir, { recursive: true })).map((f) => f.replaceAll("\\", "/")).sort();
      for (const f of [
        ".dockerignore",
        ".gitignore",
        ".runpod/hub.json",
        ".runpod/tests.json",
        "Dockerfile",
        "README.md",
        "package.json",
        "src/handler.ts",
        "test/handler.test.ts",
        "test_input.json",
        "tsconfig.json",
        "vendor/runlet-0.1.0.tgz",
        "vitest.config.ts",
      ]) {
        expect(files).toContain(f);
      }
      const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Record<string, unknown>;
      expect(pkg["name"]).toBe(`my-worker-${template}`);
      // The same Dockerfile `runlet build` writes: one generator, no copy per starter.
      expect(await readFile(join(dir, "Dockerfile"), "utf8")).toBe(renderProjectDockerfile());
      expect(pkg["dependencies"]).toMatchObject({ runlet: "file:vendor/runlet-0.1.0.tgz" });
      const hub = JSON.parse(await readFile(join(dir, ".runpod/hub.json"), "utf8")) as Record<
        string,
        unknown
      >;
      expect(hub["title"]).toBe(`my-worker-${template}`);
      const { stat } = await import("node:fs/promises");
      const checked: string[] = [];
      for (const f of files.filter(
        (f) => !f.includes("/") || f.startsWith(".runpod") || f.startsWith("src"),
      )) {
        // Folder entries are skipped by what they are; any other read error fails the test.
        if (!(await stat(join(dir, f))).isFile()) continue;
        checked.push(f);
        expect(await readFile(join(dir, f), "utf8"), f).not.toMatch(/\{\{\w+\}\}/);
      }
      expect(checked).toEqual(
        expect.arrayContaining([".runpod/hub.json", ".runpod/tests.json", "package.json", "src/handler.ts"]),
      );
    });
  }
});
