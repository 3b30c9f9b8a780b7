import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The suite runs in three lanes (vitest projects; `npm test` runs all three, and so does CI). A
 * file's lane is in its name, so each test stays in the folder of its concern and no list of paths
 * is kept by hand:
 *
 * - `*.unit.test.ts` (`unit`): no sockets, no child processes — pure functions, in-memory parts on
 *   a ManualClock, the harness's routes in memory (test/support/inject.ts) and workers connected
 *   to it (test/support/workers.ts's `memoryHarness`), doc and type checks.
 *   The lane's setup (test/support/unit-guard.ts) makes `listen`, `connect` and every way of
 *   starting a process throw. These files share one thread without per-file isolation, so the
 *   import cost is paid once: a file here must leave no global state behind (no fake timers, no
 *   `process.env` changes, no `vi.mock`).
 * - `*.process.test.ts` (`process`): tests whose subject is a process — the CLI, packaging, the
 *   bench's smoke run, the dashboard in a browser, `runlet start` children and sidecars — and the
 *   few that need a process or module graph of their own (a `vi.mock`, the soak's counts of
 *   timers and heap); each file runs isolated.
 * - `*.test.ts`, any other (`integration`): tests that need a socket — a harness on loopback where
 *   the subject is the wire, the pings or the watchdog, s3rver, an OTLP receiver — with in-process
 *   workers (in memory to the harness where the socket is not the subject); forks without
 *   per-file isolation. A new file lands here unless its name says otherwise.
 *
 * What test files share lives in test/support/ (helpers) and test/fixtures/ (handlers and workers
 * they load); test/unit/test-helper-imports.unit.test.ts keeps it so.
 * Run one lane with `npx vitest run --project unit` (or `integration`, `process`).
 */
const UNIT = ["test/**/*.unit.test.ts"];
const PROCESS = ["test/**/*.process.test.ts"];

/**
 * The files that take longest (packing and installing, building, the bench's smoke run), started
 * first so the rest fill in beside them; with vitest's cache of durations (a second run) its own
 * order decides within each rank.
 */
const SLOW_FIRST = [
  "test/package/consumer.process.test.ts",
  "test/bench/smoke.process.test.ts",
  "test/cli/build.process.test.ts",
  "test/cli/build-verify.process.test.ts",
  "test/cli/build-externals.process.test.ts",
  "test/cli/test-command.process.test.ts",
  "test/cli/init-project.process.test.ts",
];
const LANE_ORDER = ["process", "integration", "unit"];

/** vitest's order (failed, then longest or largest first) within each rank: the slow files, then process, integration, unit. */
class SlowFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification): number => {
      const slow = SLOW_FIRST.findIndex((path) => spec.moduleId.endsWith(path));
      return slow >= 0 ? slow : SLOW_FIRST.length + LANE_ORDER.indexOf(spec.project.name);
    };
    const sorted = await super.sort(files);
    return sorted
      .map((spec, at) => ({ spec, at, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.at - b.at)
      .map(({ spec }) => spec);
  }
}

// Processes tests start (`node bin/runlet.mjs`) run dist/: rebuilt before those lanes when src/ is newer.
const BUILD_DIST = ["test/build-dist.ts"];

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
    testTimeout: 30_000,
    hookTimeout: 30_000,
    sequence: { sequencer: SlowFilesFirst },
    // Tests start real servers and child processes; two cores are shared, so keep parallelism modest.
    maxWorkers: 2,
    // The AWS SDK warns once per process on Node < 22 that versions published after January 2027
    // will need Node 22. It is about future SDK releases, not this run, and repeats in every test
    // process and child; the SDK's own switch turns it off for the test run only (library code
    // and users' workers are untouched).
    // The built-in fitness checks (docs/fitness.md) are off for the workers tests start as
    // `runlet start` or under `runlet dev`: their network check would reach out of loopback and their
    // thresholds would hang on the machine's size. test/worker/fitness.process.test.ts runs them on purpose.
    env: {
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
      RUNPOD_SKIP_GPU_CHECK: "true",
    },
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: UNIT,
          // listen, connect and child processes throw here (test/support/unit-guard.ts).
          setupFiles: ["test/support/unit-guard.ts"],
          pool: "threads",
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/**/*.test.ts"],
          exclude: [...UNIT, ...PROCESS],
          globalSetup: BUILD_DIST,
          pool: "forks",
          // Each fork runs its files one after another in one module graph, so src/ is imported
          // once per fork, not once per file (most of this lane's time was imports). A file here
          // leaves no global state behind; one whose subject is a fresh process (what it loads at
          // start, a `runlet start` child) belongs in the process lane, which keeps isolation.
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: "process", include: PROCESS, globalSetup: BUILD_DIST, pool: "forks" },
      },
    ],
  },
});
