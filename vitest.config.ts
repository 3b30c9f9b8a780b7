import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The suite runs in three lanes (vitest projects; `npm test` runs all three, and so does CI):
 *
 * - `unit`: no sockets, no child processes — pure functions, in-memory parts on a ManualClock,
 *   the harness's routes in memory (test/support/inject.ts), doc and type checks. These files share one thread without
 *   per-file isolation, so the import cost is paid once: a file here must leave no global state
 *   behind (no fake timers, no `process.env` changes, no `vi.mock`).
 * - `process`: tests whose subject is a process — the CLI, packaging, the bench's smoke run, the
 *   dashboard in a browser, `runlet start` children and sidecars.
 * - `integration`: everything else — a harness on loopback with in-process workers, forks without
 *   per-file isolation. A new file lands here by default; list it under `unit` or `process` when
 *   it belongs there.
 *
 * Run one lane with `npx vitest run --project unit` (or `integration`, `process`).
 */
const UNIT = [
  "test/bench/table.test.ts",
  "test/cli/externals-copy.test.ts",
  "test/cli/inherited-env.test.ts",
  "test/cli/verify-within.test.ts",
  "test/cli/starter-allow-scripts.test.ts",
  "test/cli/templates.test.ts",
  "test/dashboard/page-modules.test.ts",
  "test/docs/*.test.ts",
  "test/harness/client-deadlines.test.ts",
  "test/harness/client-guards.test.ts",
  "test/harness/client-jobs.test.ts",
  "test/harness/client-stream.test.ts",
  "test/harness/harness-errors.test.ts",
  "test/harness/heartbeat-lapse.test.ts",
  "test/harness/held-waits.test.ts",
  "test/harness/job-entry.test.ts",
  "test/harness/job-events.test.ts",
  "test/harness/job-service.test.ts",
  "test/harness/pass-through.test.ts",
  "test/harness/ping-job-list.test.ts",
  "test/harness/progress-status.test.ts",
  "test/harness/requests-list.test.ts",
  "test/harness/route-conformance.test.ts",
  "test/harness/route-match.test.ts",
  "test/harness/stray-posts.test.ts",
  "test/harness/stream-body.test.ts",
  "test/harness/stream-gather.test.ts",
  "test/hostile/hand-out.test.ts",
  "test/hostile/held-cases.test.ts",
  "test/hostile/host-header.test.ts",
  "test/hostile/memory-bounds.test.ts",
  "test/hostile/request-head.test.ts",
  "test/hostile/secrets.test.ts",
  "test/management/routes.test.ts",
  "test/management/contract.test.ts",
  "test/management/openapi-generated.test.ts",
  "test/management/openapi-types.test.ts",
  "test/openai/error-body.test.ts",
  "test/openai/python-literal.test.ts",
  "test/openai/responses-params.test.ts",
  "test/s3/store-config.test.ts",
  "test/stream/coalesce.test.ts",
  "test/stream/reassemble.test.ts",
  "test/stream/split.test.ts",
  "test/telemetry/settings.test.ts",
  "test/types/*.test.ts",
  "test/unit/call-limits.test.ts",
  "test/unit/errors-doc.test.ts",
  "test/unit/fifo.test.ts",
  "test/unit/recent-set.test.ts",
  "test/unit/keyed-waiters.test.ts",
  "test/unit/logger.test.ts",
  "test/unit/option-schema.test.ts",
  "test/unit/platform-urls.test.ts",
  "test/unit/protocol.test.ts",
  "test/unit/retry-policy.test.ts",
  "test/unit/send-with-retry.test.ts",
  "test/unit/state-machine.test.ts",
  "test/unit/task-sink.test.ts",
  "test/unit/version.test.ts",
  "test/unit/wait.test.ts",
  "test/lb/lb-config.test.ts",
  "test/lb/lb-dev-banner.test.ts",
  "test/worker/define-handler.test.ts",
  "test/worker/import-graph.test.ts",
  "test/worker/floating-promises.test.ts",
  "test/worker/layers.test.ts",
  "test/worker/lifecycle.test.ts",
  "test/worker/part-list.test.ts",
  "test/worker/run-parts.test.ts",
  "test/worker/scheduler.test.ts",
];

const PROCESS = [
  // vi.mock of node:fs/promises: it needs a module graph of its own, which only this lane keeps.
  "test/cache/sync-lock-race.test.ts",
  // The soak counts the process's timers, listeners and heap day by day: what other files left in
  // a shared fork would count too, so it runs in a process of its own.
  "test/soak/thirty-days.test.ts",
  "test/bench/smoke.test.ts",
  "test/cli/!(templates|externals-copy|inherited-env|starter-allow-scripts|verify-within).test.ts",
  "test/lb/lb-process.test.ts",
  "test/lb/lb-deploy-dev.test.ts",
  "test/dashboard/dashboard-browser.test.ts",
  "test/dashboard/dashboard-dev.test.ts",
  "test/dashboard/timeline-browser.test.ts",
  "test/harness/cli-harness.test.ts",
  "test/hostile/download-parser.test.ts",
  "test/hostile/sidecar-output.test.ts",
  "test/hostile/terminal-escapes.test.ts",
  "test/management/deploy.test.ts",
  "test/package/*.test.ts",
  "test/reliability/crash.test.ts",
  "test/reliability/log-faults.test.ts",
  "test/reliability/lost-worker.test.ts",
  "test/reliability/shutdown.test.ts",
  "test/sidecar/*.test.ts",
  "test/telemetry/disabled.test.ts",
  "test/unit/optional-peers.test.ts",
  "test/worker/fitness.test.ts",
  "test/worker/health.test.ts",
  "test/worker/platform-https.test.ts",
  "test/worker/process.test.ts",
  "test/worker/thread-load.test.ts",
];

/**
 * The files that take longest (packing and installing, building, the bench's smoke run), started
 * first so the rest fill in beside them; with vitest's cache of durations (a second run) its own
 * order decides within each rank.
 */
const SLOW_FIRST = [
  "test/package/consumer.test.ts",
  "test/bench/smoke.test.ts",
  "test/cli/build.test.ts",
  "test/cli/build-verify.test.ts",
  "test/cli/build-externals.test.ts",
  "test/cli/test-command.test.ts",
  "test/cli/init-project.test.ts",
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
    // thresholds would hang on the machine's size. test/worker/fitness.test.ts runs them on purpose.
    env: {
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: "true",
      RUNPOD_SKIP_GPU_CHECK: "true",
    },
    projects: [
      {
        extends: true,
        test: { name: "unit", include: UNIT, pool: "threads", isolate: false },
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
