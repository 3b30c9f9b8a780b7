#!/usr/bin/env node
// The `runlet` command: runs the compiled CLI in dist/ and exits with the code it returns.
// A checkout of the repository builds dist/ on `npm install` (its prepare script) or `npm run build`.
import { existsSync } from "node:fs";

const entry = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    "runlet: dist/cli/main.js is missing: this copy of runlet is not built; run `npm run build` in it\n",
  );
  process.exit(1);
}
const { main } = await import(entry.href);
try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  // main() reports runlet's own errors itself; this is a fault inside runlet, so keep its stack.
  process.stderr.write(`runlet: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
}
