import { access } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { RunletError } from "../errors.js";
import { type HandlerDefinition, isHandlerDefinition } from "../handler/define-handler.js";

/** Handler files runlet starts: TypeScript (through tsx) or ES modules. */
const HANDLER_FILE = /\.(ts|mts|mjs|js)$/;

/**
 * Imports a handler file and returns its default export, checked to be a `defineHandler(...)`
 * result (RUNLET_HANDLER_LOAD otherwise). TypeScript files need a loader registered (the CLI registers tsx for a .ts handler).
 *
 * @example
 * const { definition, path } = await loadHandler("src/handler.ts");
 */
export async function loadHandler(
  file: string,
  cwd: string = process.cwd(),
): Promise<{ readonly definition: HandlerDefinition; readonly path: string }> {
  const path = isAbsolute(file) ? file : resolve(cwd, file);
  if (!HANDLER_FILE.test(path)) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      `${file}: a handler file must end in .ts, .mts, .mjs or .js`,
    );
  }
  try {
    await access(path);
  } catch (err) {
    throw new RunletError("RUNLET_HANDLER_LOAD", `${file}: no such file`, { cause: err });
  }
  let mod: { default?: unknown };
  try {
    mod = (await import(pathToFileURL(path).href)) as { default?: unknown };
  } catch (err) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      `${file} could not be imported: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  if (!isHandlerDefinition(mod.default)) {
    throw new RunletError(
      "RUNLET_HANDLER_LOAD",
      `${file} must \`export default defineHandler({...})\`; its default export is ${mod.default === undefined ? "missing" : `a ${typeof mod.default}`}`,
    );
  }
  return { definition: mod.default, path };
}
