import { spawn } from "node:child_process";

/**
 * buildah with the settings the image check runs under: the vfs storage driver (works in any
 * container, no overlay mounts) and chroot isolation (no user namespaces, no daemon).
 */
export const BUILDAH_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  STORAGE_DRIVER: "vfs",
  BUILDAH_ISOLATION: "chroot",
};

/** Options of {@link run}. */
export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Print the command's output as it comes (long builds), besides collecting it. @default true */
  readonly echo?: boolean;
}

/**
 * Runs a command to its end and returns its stdout; a non-zero exit throws with the command,
 * the exit code and the last lines of its output.
 */
export function run(cmd: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const echo = options.echo ?? true;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      env: options.env ?? BUILDAH_ENV,
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (echo) process.stdout.write(d);
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
      if (echo) process.stderr.write(d);
    });
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (code === 0) {
        resolve(out);
        return;
      }
      const tail = `${out}${err}`.trimEnd().split("\n").slice(-15).join("\n");
      reject(new Error(`${cmd} ${args.join(" ")} exited with ${code ?? signal}:\n${tail}`));
    });
  });
}

/** `buildah ...` under {@link BUILDAH_ENV}. */
export function buildah(args: readonly string[], options: Omit<RunOptions, "env"> = {}): Promise<string> {
  return run("buildah", args, { ...options, env: BUILDAH_ENV });
}

/** Whether buildah's storage holds an image of that name. */
export async function hasImage(name: string): Promise<boolean> {
  const out = await buildah(["images", "--noheading", "--format", "{{.Name}}:{{.Tag}}"], { echo: false });
  const wanted = name.includes("/") ? [name] : [name, `localhost/${name}`, `docker.io/library/${name}`];
  return out.split("\n").some((line) => wanted.includes(line.trim()));
}
