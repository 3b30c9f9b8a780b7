import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * vitest's global setup: brings dist/ up to date with src/ before any test runs, because the
 * processes tests start (`node bin/runlet.mjs ...`) and the handlers they load run the build.
 * Nothing happens when dist/ is already newer than every source.
 */
export default function setup(): void {
  const script = fileURLToPath(new URL("../scripts/build.mjs", import.meta.url));
  const r = spawnSync(process.execPath, [script, "--if-stale"], { stdio: "inherit" });
  if (r.status !== 0) throw new Error(`building dist/ failed (exit ${r.status ?? r.signal})`);
}
