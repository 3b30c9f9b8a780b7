#!/usr/bin/env node
// Runs one TypeScript file under Node through tsx's loader: `node bin/run-ts.mjs <file.ts> [args...]`.
// The file sees its own arguments from process.argv[2] on, as if Node had run it directly.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { register } from "tsx/esm/api";

const file = process.argv[2];
if (file === undefined || file.startsWith("-")) {
  process.stderr.write("usage: node bin/run-ts.mjs <file.ts> [args...]\n");
  process.exit(2);
}
register();
process.argv.splice(1, 1);
await import(pathToFileURL(resolve(file)).href);
