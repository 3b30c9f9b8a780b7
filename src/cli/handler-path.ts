import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { usageError } from "./command.js";

/** Where the commands look for a handler when none is named, in this order (relative to cwd). */
export const DEFAULT_HANDLER_PATHS = [
  "src/handler.ts",
  "handler.ts",
  "src/handler.js",
  "handler.js",
] as const;

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch (err) {
    // A missing or unreadable path is simply "not a handler here"; the caller says what to do.
    if (
      (err as NodeJS.ErrnoException).code === "ENOENT" ||
      (err as NodeJS.ErrnoException).code === "ENOTDIR"
    ) {
      return false;
    }
    throw err;
  }
}

/**
 * Resolves the handler file a command was given (or finds the default one) to an absolute path.
 * A missing file is a usage error (exit code 2) that names what was tried.
 */
export async function resolveHandlerPath(given: string | undefined, cwd = process.cwd()): Promise<string> {
  if (given !== undefined) {
    const path = resolve(cwd, given);
    if (!(await isFile(path))) throw usageError(`handler file not found: ${given}`);
    return path;
  }
  for (const candidate of DEFAULT_HANDLER_PATHS) {
    const path = resolve(cwd, candidate);
    if (await isFile(path)) return path;
  }
  throw usageError(
    `no handler given and none found (looked for ${DEFAULT_HANDLER_PATHS.join(", ")}); pass its path`,
  );
}
