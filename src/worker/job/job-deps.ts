import type { Logger } from "pino";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import type { WorkerEventHub } from "../events.js";
import type { WorkerFacts } from "../facts.js";
import type { SlotSource } from "../platform/heartbeat.js";
import type { PlatformHttp } from "../platform/platform-http.js";
import type { OffloadDeps } from "./offload.js";
import { type FinalDelivery, JobOutbox } from "./outbox.js";
import type { Scheduler } from "./scheduler.js";

/**
 * What a job on the main thread is run with — the worker's objects ActiveJob (active-job.ts) and the
 * job board share — and its outbox, wired the one way every job's is.
 */

/** What a job uses of the worker, built once by the worker (its `config`, `giveUp` and `s3` also offload outputs). */
export interface JobDeps extends OffloadDeps {
  readonly definition: HandlerDefinition;
  readonly http: PlatformHttp;
  /** When the job's run starts (plain: at once; a batch handler's: with its batch). */
  readonly scheduler: Scheduler;
  /** Mints each job's heartbeat slot (the job table the pings name, the watchdog's deadlines); undefined: no heartbeat thread, the null slot. */
  readonly heartbeat: SlotSource | undefined;
  readonly log: Logger;
  /** The worker's lifecycle events (taken, started, progress, finished, failed, retrying). */
  readonly events?: WorkerEventHub;
  /**
   * The worker's lifecycle, told the facts a job finds: its handler ran away (ignored its signal
   * past the grace), threw a WorkerUnfitError (docs/protocol.md, "Unfit workers"), its result asks
   * for a new worker (`stopPod`: the platform replaces this worker, so it takes no further job, as
   * the reference worker does), or its result was lost. The lifecycle decides what follows.
   */
  readonly facts: WorkerFacts;
}

/**
 * A job's outbox, wired as every job's is: posts retried on the worker's policy until `giveUp`,
 * and a final result given up on told to the lifecycle as lost. `events` (a job the worker runs)
 * also hears its retries and its report; a job failed unrun passes none.
 */
export function openOutbox(
  jobId: string,
  deps: JobDeps,
  log: Logger,
  events?: WorkerEventHub,
): { readonly outbox: JobOutbox; readonly reported: Promise<FinalDelivery> } {
  const { config, http, giveUp, facts } = deps;
  const outbox = new JobOutbox({
    jobId,
    http,
    log,
    giveUp,
    clock: config.clock,
    retry: config.postRetry,
    ...(events === undefined ? {} : { events }),
  });
  const reported = outbox.done.then((delivery) => {
    events?.emit("reported", { jobId, delivery });
    if (delivery === "gave-up") facts.lost(jobId);
    return delivery;
  });
  return { outbox, reported };
}
