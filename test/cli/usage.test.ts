import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderProjectDockerfile } from "../../src/cli/dockerfile.js";
import { VERSION } from "../../src/version.js";
import { REPO_ROOT, runCli } from "./run-cli.js";

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
      'runlet init: unknown template "gpu"; choose one of basic, stream, s3, openai, batch (RUNLET_CLI_USAGE)\n',
    );
  });

  it("writes a file: dependency on the tarball --runlet-from names, relative to the project", async () => {
    await mkdir(join(tmp, "vendor"), { recursive: true });
    await writeFile(join(tmp, "vendor", "runlet-0.1.0.tgz"), "");
    const r = await runCli([
      "init",
      join(tmp, "apps", "w"),
      "--runlet-from",
      join(tmp, "vendor", "runlet-0.1.0.tgz"),
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("\nIts runlet dependency is file:../../vendor/runlet-0.1.0.tgz.\n\nNext:\n");
    const pkg = JSON.parse(await readFile(join(tmp, "apps", "w", "package.json"), "utf8")) as Record<
      string,
      unknown
    >;
    expect(pkg["dependencies"]).toEqual({ runlet: "file:../../vendor/runlet-0.1.0.tgz", zod: "^4.1.0" });
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
      const r = await runCli(["init", dir, "--template", template]);
      expect(r.code).toBe(0);
      const files = (await readdir(dir, { recursive: true })).map((f) => f.replaceAll("\\", "/")).sort();
      for (const f of [
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
        "vitest.config.ts",
      ]) {
        expect(files).toContain(f);
      }
      const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Record<string, unknown>;
      expect(pkg["name"]).toBe(`my-worker-${template}`);
      // The same Dockerfile `runlet build` writes: one generator, no copy per starter.
      expect(await readFile(join(dir, "Dockerfile"), "utf8")).toBe(renderProjectDockerfile());
      // Run from a checkout (not installed from a tarball), the project asks the registry for runlet.
      expect(pkg["dependencies"]).toMatchObject({ runlet: `^${VERSION}` });
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
