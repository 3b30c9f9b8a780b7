#!/usr/bin/env node
// The `runlet` command: runs the compiled CLI in dist/ and exits with the code it returns.
// A checkout of the repository builds dist/ on `npm install` (its prepare script) or `npm run build`.
import { existsSync, readFileSync } from "node:fs";

// Below the Node floor (package.json's engines, undici 8's: Node 22.19) runlet refuses to start,
// naming both versions, before any of its modules load.
const floor = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
).engines.node.replace(/^>=\s*/, "");
const [have, need] = [process.versions.node, floor].map((v) => v.split(".").map(Number));
const older =
  have[0] !== need[0] ? have[0] < need[0] : have[1] !== need[1] ? have[1] < need[1] : have[2] < need[2];
if (older) {
  process.stderr.write(
    `runlet: this is Node ${process.versions.node} (${process.execPath}); runlet needs Node ${floor} or later (Node 22 LTS: undici 8's floor). In runlet's repository, npm scripts and npx use the Node of its \`node\` dev dependency (RUNLET_NODE_TOO_OLD)\n`,
  );
  process.exit(1);
}

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
