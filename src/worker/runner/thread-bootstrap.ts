import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * How runlet's threads start (isolation threads and the heartbeat thread): the code each is
 * evaluated from, and tsx's loader when the module it imports is TypeScript (sources). One module
 * so neither thread's driver imports the other.
 */

/**
 * An isolation thread from any setting: registers tsx when TypeScript must load, imports the
 * entry, and, for sources, hands the handler's default export to the entry's runRunnerThread.
 * A bundle's entry runs itself on import (it checks isRunnerThread()).
 */
export const RUNNER_THREAD_BOOTSTRAP = `
const { workerData } = require("node:worker_threads");
(async () => {
  if (workerData.tsxApiUrl) (await import(workerData.tsxApiUrl)).register();
  const entry = await import(workerData.entryUrl);
  if (workerData.handlerUrl) {
    const handler = await import(workerData.handlerUrl);
    entry.runRunnerThread(handler.default);
  }
})().catch((err) => { setImmediate(() => { throw err; }); });
`;

/** The heartbeat thread: imports its module, registering tsx first when it is TypeScript (sources). */
export const HEARTBEAT_BOOTSTRAP = `
const { workerData } = require("node:worker_threads");
(async () => {
  if (workerData.tsxApiUrl) (await import(workerData.tsxApiUrl)).register();
  await import(workerData.entryUrl);
})().catch((err) => { setImmediate(() => { throw err; }); });
`;

/** A TypeScript file's name: loading it in a thread needs tsx. */
export const TS_FILE = /\.(c|m)?tsx?$/;

/** The file URL of tsx's ESM API (its CommonJS build cannot register the ESM loader in a thread). */
export function tsxApiUrl(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve("tsx/package.json");
  // Read through require, not node:fs: a static ESM import of node:fs makes Node build its
  // namespace, which loads node:fs/promises, file streams and node:readline with it (27 of Node's
  // modules, compiled anew at every start under the image's flags).
  const manifest = require(manifestPath) as {
    exports: Record<string, { import?: { default?: string } }>;
  };
  const target = manifest.exports["./esm/api"]?.import?.default ?? "./dist/esm/api/index.mjs";
  return pathToFileURL(join(dirname(manifestPath), target)).href;
}

/** A path or URL as a URL. */
export function toUrl(pathOrUrl: string): string {
  return /^[a-z]+:\/\//i.test(pathOrUrl) ? pathOrUrl : pathToFileURL(pathOrUrl).href;
}
