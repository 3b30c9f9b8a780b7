import { spawn } from "node:child_process";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import { RunletError } from "../errors.js";
import { VERSION } from "../version.js";
import type { RunletSource } from "./runlet-source.js";

/** The project folder runlet's tarball is kept in, committed with the project. */
export const VENDOR_DIR = "vendor";

/** The dependency {@link vendorRunlet} chose, and what it wrote. */
export interface VendoredRunlet {
  /** The project's `runlet` dependency: `file:vendor/<tarball>` or `^<version>`. */
  readonly dependency: string;
  /** The tarball written, relative to the project (`vendor/runlet-0.1.0.tgz`); undefined for the registry. */
  readonly file?: string;
  /** Where it came from, for init's output: "a copy of ...", "packed from ...". */
  readonly origin: string;
}

/** How to start npm: the npm running us (`npx`, `npm exec`), else `npm` on the PATH. */
function npmCommand(): { file: string; args: string[]; shell: boolean } {
  const execPath = process.env["npm_execpath"];
  if (execPath !== undefined && /npm-cli\.c?js$/.test(execPath)) {
    return { file: process.execPath, args: [execPath], shell: false };
  }
  const windows = process.platform === "win32";
  return { file: windows ? "npm.cmd" : "npm", args: [], shell: windows };
}

/** The environment for npm: ours, less what describes an npm script that started us (npx's project). */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_package_|npm_lifecycle_|npm_config_local_prefix$|INIT_CWD$)/.test(key)) continue;
    env[key] = value;
  }
  return env;
}

/** Runs `npm pack <folder>` into `destination`; rejects with npm's last lines when it fails. */
function npmPack(folder: string, destination: string): Promise<void> {
  const npm = npmCommand();
  return new Promise((resolve, reject) => {
    const child = spawn(
      npm.file,
      [...npm.args, "pack", folder, "--pack-destination", destination, "--silent"],
      { cwd: destination, env: npmEnv(), shell: npm.shell, stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      // The tail is what explains a failure; keep it bounded.
      stderr = (stderr + d).slice(-4000);
    });
    child.once("error", (err) =>
      reject(vendorError(`could not start npm to pack ${folder}: ${err.message}`)),
    );
    child.once("close", (code, signal) => {
      if (code === 0) resolve();
      else {
        const tail = stderr.trim().split("\n").slice(-8).join("\n");
        reject(
          vendorError(`npm pack ${folder} exited with ${code ?? signal}${tail === "" ? "" : `:\n${tail}`}`),
        );
      }
    });
  });
}

function vendorError(message: string): RunletError {
  return new RunletError(
    "RUNLET_CLI_VENDOR_FAILED",
    `${message}\nPack runlet yourself (npm pack) and pass the tarball: runlet init --runlet-from ./runlet-${VERSION}.tgz`,
  );
}

/**
 * Makes a new project's runlet dependency from `source`: a tarball is copied into the project's
 * vendor/ folder, a folder is packed there with `npm pack`, and the dependency is
 * `file:vendor/<tarball>`, inside the project, so `docker build .` and a fresh clone install it
 * from the project alone. A registry source is `^<version>`.
 */
export async function vendorRunlet(source: RunletSource, projectDir: string): Promise<VendoredRunlet> {
  if (source.kind === "registry") return { dependency: `^${VERSION}`, origin: "the registry" };
  const vendor = join(projectDir, VENDOR_DIR);
  await mkdir(vendor, { recursive: true });
  let name: string;
  if (source.kind === "tarball") {
    name = basename(source.path);
    await copyFile(source.path, join(vendor, name));
  } else {
    try {
      await npmPack(source.path, vendor);
    } catch (err) {
      await rm(vendor, { recursive: true, force: true });
      throw err;
    }
    const packed = (await readdir(vendor)).filter((f) => f.endsWith(".tgz"));
    if (packed.length !== 1 || packed[0] === undefined) {
      throw vendorError(
        `npm pack ${source.path} left ${packed.length} tarballs in ${VENDOR_DIR}/, expected 1`,
      );
    }
    name = packed[0];
  }
  const file = `${VENDOR_DIR}/${name}`;
  const origin = source.kind === "tarball" ? `a copy of ${source.path}` : `packed from ${source.path}`;
  return { dependency: `file:${file}`, file, origin };
}
