import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "../support/run-cli.js";

const run = promisify(execFile);

/** Where the test's Node 22 lives: .tmp/ is git-ignored and survives between runs. */
const PREFIX = join(REPO_ROOT, ".tmp", "node22");
const BIN = join(PREFIX, "node_modules", "node", "bin", "node");

async function version(bin: string): Promise<string | undefined> {
  try {
    return (await run(bin, ["--version"])).stdout.trim();
  } catch {
    return undefined; // Not installed, or a broken install: the caller installs again or falls back.
  }
}

/**
 * A Node 22 binary, as the image's base has: installed once from the npm registry's `node`
 * package into .tmp/node22 and reused. When the install fails (no registry), falls back to the
 * Node running the tests and says so in the test output.
 */
export async function node22(): Promise<{
  readonly bin: string;
  readonly version: string;
  readonly fallback: boolean;
}> {
  let v = existsSync(BIN) ? await version(BIN) : undefined;
  if (v === undefined || !v.startsWith("v22.")) {
    try {
      await mkdir(PREFIX, { recursive: true });
      await run(
        "npm",
        [
          "install",
          "--no-save",
          "--no-audit",
          "--no-fund",
          "--no-package-lock",
          "--prefix",
          PREFIX,
          "node@22",
        ],
        { timeout: 180_000 },
      );
      v = await version(BIN);
    } catch (err) {
      console.warn(
        `node@22 could not be installed (${(err as Error).message.split("\n")[0]}); using ${process.version}`,
      );
    }
  }
  if (v?.startsWith("v22.")) return { bin: BIN, version: v, fallback: false };
  console.warn(
    `Node 22 is not available; running the bundle with the current Node ${process.version} instead`,
  );
  return { bin: process.execPath, version: process.version, fallback: true };
}
