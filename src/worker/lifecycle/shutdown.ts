import type { Clock } from "../../clock.js";
import { sleep } from "../../wait.js";
import type { JobBoard } from "../job/job-board.js";

/**
 * The jobs' part of a graceful shutdown (docs/architecture.md, "Decisions", item 2: no result is
 * lost), in the lifecycle's two middle states (lifecycle.ts): while draining, running jobs get up
 * to the grace on the worker's clock to finish, and the rest are aborted and reported as failed
 * with the reason; while flushing, every report is awaited (the lifecycle's flush deadline aborts
 * their retrying).
 */

/**
 * Resolves once every job held has finished (or reported), or `waitMs` (what is left of the grace
 * of `shutdownGraceMs`, the configured one the failure names) ran out and the rest were aborted.
 */
export async function drainJobs(
  board: JobBoard,
  waitMs: number,
  shutdownGraceMs: number,
  clock: Clock,
): Promise<void> {
  const finished = new AbortController();
  await Promise.race([
    // A job already reported (e.g. a runaway handler that was timed out) needs no grace.
    Promise.all(board.jobs().map((job) => Promise.race([job.finished, job.reported]))).then(() =>
      finished.abort(),
    ),
    // Ends early, its timer cleared, once every job finished.
    sleep(waitMs, finished.signal, clock),
  ]);
  finished.abort();
  for (const job of board.jobs()) {
    job.shutdown(`the job did not finish within the ${shutdownGraceMs} ms shutdown grace`);
  }
}

/** Resolves once every job's report, and every unrun job's, is delivered or given up on. */
export async function flushReports(board: JobBoard): Promise<void> {
  await Promise.all([...board.jobs().map((job) => job.reported), ...board.unrunReports()]);
}
