import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // Tests import runlet's sources: `runlet` and `runlet/<name>` mean src/, as in tsconfig.json's paths
    // (`runlet/package.json` stays the manifest).
    alias: [
      {
        find: /^runlet(\/(?!package\.json$)[^/]+)?$/,
        replacement: fileURLToPath(new URL("./src$1/index.ts", import.meta.url)),
      },
    ],
  },
  test: {
    include: ["test/**/*.test.ts"],
    // Processes the tests start (`node bin/runlet.mjs`) run dist/: rebuilt here when src/ is newer.
    globalSetup: ["test/build-dist.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes; two cores are shared, so keep parallelism modest.
    pool: "forks",
    maxWorkers: 2,
    // The AWS SDK warns once per process on Node < 22 that versions published after January 2027
    // will need Node 22. It is about future SDK releases, not this run, and repeats in every test
    // process and child; the SDK's own switch turns it off for the test run only (library code
    // and users' workers are untouched).
    // The built-in fitness checks (docs/fitness.md) are off for the workers tests start as
    // `runlet start` or under `runlet dev`: their network check would reach out of loopback and their
    // thresholds would hang on the machine's size. test/worker/fitness.test.ts runs them on purpose.
    env: {
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
      RUNPOD_SKIP_GPU_CHECK: "true",
    },
  },
});
