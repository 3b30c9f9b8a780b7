import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes; two cores are shared, so keep parallelism modest.
    pool: "forks",
    maxWorkers: 2,
    // The AWS SDK warns once per process on Node < 22 that versions published after January 2027
    // will need Node 22. It is about future SDK releases, not this run, and repeats in every test
    // process and child; the SDK's own switch turns it off for the test run only (library code
    // and users' workers are untouched).
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
