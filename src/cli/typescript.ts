import type * as TsxApi from "tsx/esm/api";
import { importPeer } from "../optional-peers.js";

/** Handler files that need a TypeScript loader: .ts, .mts, .cts (and their x variants). */
const TS_FILE = /\.(c|m)?tsx?$/;

let registered = false;

/**
 * Lets this process import TypeScript from now on (tsx's loader) when `file` is TypeScript. Only
 * the commands that import a user's `.ts` handler call it: importing runlet, or running a `.mjs`
 * handler or a bundle, never loads tsx.
 */
export async function allowTypeScript(file: string): Promise<void> {
  if (registered || !TS_FILE.test(file)) return;
  const { register } = await importPeer<typeof TsxApi>(
    "tsx",
    "tsx/esm/api",
    `a TypeScript handler (${file})`,
  );
  register();
  registered = true;
}
