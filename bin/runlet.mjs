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
  // main() reports runlet's own errors itself; anything else is unexpected, so its stack follows.
  const stack = err instanceof Error && err.stack !== undefined ? `${err.stack}\n` : "";
  process.stderr.write(
    `runlet: ${err instanceof Error ? err.message : String(err)} (RUNLET_CLI_UNEXPECTED)\n${stack}`,
  );
  process.exitCode = 1;
}
