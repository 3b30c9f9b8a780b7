/**
 * The time tests give isolation threads, in one place. A thread loads tsx, zod and the handler
 * before its first job: well under a second on a quiet machine, several seconds on a loaded
 * 2-core one. Every test that waits on a thread's start (or its first job) uses these, so no test
 * is tighter than another about the same start-up.
 */

/** The longest wait for an isolation thread to start and finish (or report from) its first job, ms. */
export const THREAD_START_MS = 60_000;

/** The budget of a whole test that starts isolation threads: a start-up plus the test's own work, ms. */
export const THREAD_TEST_MS = 90_000;
