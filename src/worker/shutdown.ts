import type { JobBoard } from "./job-board.js";

/**
 * The jobs' part of a graceful shutdown (docs/architecture.md, "Decisions", item 2: no result is lost): running
 * jobs get up to the grace to finish; the rest are aborted and reported as failed with the reason;
 * then every outbox is flushed, up to the flush deadline, after which retrying gives up.
 */

/** What {@link finishJobs} works on. */
export interface FinishJobsOptions {
  /** The jobs held and the unrun jobs' reports (read again after the grace: some have finished). */
  readonly board: JobBoard;
  /** How long running jobs may go on finishing, ms (the worker's shutdownGraceMs). */
  readonly shutdownGraceMs: number;
  /** How long outboxes may go on posting after the grace, ms (the worker's flushTimeoutMs). */
  readonly flushTimeoutMs: number;
  /** Aborting it ends every retry; aborted once the flush deadline passes. */
  readonly giveUp: AbortController;
}

/** Resolves once every job is reported, or given up on at the flush deadline. */
export async function finishJobs(options: FinishJobsOptions): Promise<void> {
  const { board, shutdownGraceMs, flushTimeoutMs, giveUp } = options;
  const running = board.jobs();
  const graceOver = new AbortController();
  const timer = setTimeout(() => graceOver.abort(), shutdownGraceMs);
  await Promise.race([
    // A job already reported (e.g. a runaway handler that was timed out) needs no grace.
    Promise.all(running.map((job) => Promise.race([job.finished, job.reported]))),
    new Promise((resolve) => graceOver.signal.addEventListener("abort", resolve, { once: true })),
  ]);
  clearTimeout(timer);
  for (const job of board.jobs()) {
    job.shutdown(`the job did not finish within the ${shutdownGraceMs} ms shutdown grace`);
  }
  const flushTimer = setTimeout(() => giveUp.abort(), flushTimeoutMs);
  await Promise.all([...board.jobs().map((job) => job.reported), ...board.unrunReports()]);
  clearTimeout(flushTimer);
}
