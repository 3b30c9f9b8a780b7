import { spawn } from "node:child_process";
import { dirname, join } from "node:path";

/** What a finished child process printed, and how it ended. */
export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** npm's own CLI: the one running `npm test`, else the one installed beside this Node. */
export const NPM_CLI = process.env["npm_execpath"]?.endsWith("npm-cli.js")
  ? process.env["npm_execpath"]
  : join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "bin", "npm-cli.js");

/** Runs `file args...` in `cwd` to completion, without the variables of the `npm test` running this file. */
export function run(file: string, args: readonly string[], cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    // These describe the `npm test` that runs this file, not the package npm is asked to pack.
    for (const key of Object.keys(env)) {
      if (/^(npm_package_|npm_lifecycle_|npm_config_local_prefix$|INIT_CWD$)/.test(key)) delete env[key];
    }
    const child = spawn(file, [...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs npm's CLI with `args` in `cwd`. */
export function npm(args: readonly string[], cwd: string): Promise<Run> {
  return run(process.execPath, [NPM_CLI, ...args], cwd);
}
