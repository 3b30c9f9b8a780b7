import type { JobView } from "./job-entry.js";
import type { WebhookAttempt } from "./webhooks.js";

/**
 * The harness's own spans for each job (docs/observability.md, "The harness's timeline"): what it
 * sees over HTTP — the job queued, handed out, its progress and stream posts, its result, its
 * webhook — kept in memory with no collector, bounded in jobs and in spans a job, for the
 * dashboard's timeline. A worker's first job also gets a `setup` span: from the worker's first
 * request (its heartbeat starts with it) to its first job-take (it was ready then).
 */

/** One span of a job's timeline; times are epoch ms on the harness's clock. */
export interface TimelineSpan {
  /** `queue`, `setup`, `take`, `handler`, `stream`, `progress`, `result` or `webhook`. */
  readonly name: string;
  readonly start: number;
  /** Undefined while it is still open (a job in the queue, a handler still running). */
  end: number | undefined;
  readonly attributes: Record<string, string | number | boolean>;
}

/** Jobs whose timelines are kept (the oldest is dropped first). */
export const MAX_TIMELINE_JOBS = 1_000;
/** Spans kept per job: a job put back in the queue again and again stops adding spans here. */
export const MAX_SPANS_PER_JOB = 24;
/** Longest attribute text kept (a worker id, a webhook's error). */
const MAX_TEXT = 200;

const text = (s: string) => s.slice(0, MAX_TEXT);

/** Where a job is, as far as its timeline knows. */
interface Track {
  readonly spans: TimelineSpan[];
  status: string | undefined;
  queue: TimelineSpan | undefined;
  handler: TimelineSpan | undefined;
  stream: TimelineSpan | undefined;
  progress: TimelineSpan | undefined;
}

export class JobTimelines {
  readonly #jobs = new Map<string, Track>();
  readonly #now: () => number;
  /** When a worker was first seen and first asked for a job: the setup span of its first job. */
  readonly #firstSeen: (
    workerId: string,
  ) => { readonly seen: number; readonly ready: number | undefined } | undefined;
  /** Workers that already had a job (their next ones have no setup span); bounded like the jobs. */
  readonly #served = new Set<string>();

  constructor(
    now: () => number,
    firstSeen: (
      workerId: string,
    ) => { readonly seen: number; readonly ready: number | undefined } | undefined,
  ) {
    this.#now = now;
    this.#firstSeen = firstSeen;
  }

  /** The job's spans, oldest first; empty for a job the harness no longer tracks. */
  spans(jobId: string, webhooks: readonly WebhookAttempt[] = []): TimelineSpan[] {
    const track = this.#jobs.get(jobId);
    const out =
      track === undefined ? [] : track.spans.map((s) => ({ ...s, attributes: { ...s.attributes } }));
    for (const a of webhooks) {
      if (a.jobId !== jobId || a.at === undefined) continue;
      out.push({
        name: "webhook",
        start: a.at,
        end: a.at + (a.ms ?? 0),
        attributes: {
          attempt: a.attempt,
          ok: a.ok,
          outcome: typeof a.outcome === "number" ? a.outcome : text(a.outcome),
        },
      });
    }
    return out;
  }

  #track(job: JobView): Track {
    let track = this.#jobs.get(job.id);
    if (track === undefined) {
      track = {
        spans: [],
        status: undefined,
        queue: undefined,
        handler: undefined,
        stream: undefined,
        progress: undefined,
      };
      this.#jobs.set(job.id, track);
      if (this.#jobs.size > MAX_TIMELINE_JOBS) {
        const oldest = this.#jobs.keys().next().value;
        if (oldest !== undefined) this.#jobs.delete(oldest);
      }
    }
    return track;
  }

  #add(track: Track, span: TimelineSpan): TimelineSpan | undefined {
    if (track.spans.length >= MAX_SPANS_PER_JOB) return undefined;
    track.spans.push(span);
    return span;
  }

  /** A job was created, handed out, put back in the queue or deleted. */
  changed(job: JobView): void {
    const track = this.#track(job);
    if (job.status === track.status) return;
    track.status = job.status;
    const now = this.#now();
    if (job.status === "IN_QUEUE") {
      if (track.handler !== undefined) track.handler.end ??= now;
      track.handler = undefined;
      track.queue = this.#add(track, {
        name: "queue",
        start: track.spans.length === 0 ? job.createdAt : now,
        end: undefined,
        attributes: {},
      });
      return;
    }
    if (job.status !== "IN_PROGRESS") return;
    const at = job.startedAt ?? now;
    // Handed out in the call that queued it (a take was waiting): its queue span is still drawn.
    if (track.spans.length === 0) {
      track.queue = this.#add(track, { name: "queue", start: job.createdAt, end: at, attributes: {} });
    }
    if (track.queue !== undefined) track.queue.end = at;
    track.queue = undefined;
    const workerId = job.workerId ?? "";
    const seen = this.#firstSeen(workerId);
    if (!this.#served.has(workerId) && seen !== undefined) {
      // Up to its first take: a worker that then waited for work was ready before this job came.
      const ready = Math.min(seen.ready ?? at, at);
      this.#add(track, {
        name: "setup",
        start: seen.seen,
        end: ready,
        attributes: { worker: text(workerId) },
      });
    }
    this.#served.add(workerId);
    if (this.#served.size > MAX_TIMELINE_JOBS) {
      const oldest = this.#served.values().next().value;
      if (oldest !== undefined) this.#served.delete(oldest);
    }
    this.#add(track, { name: "take", start: at, end: at, attributes: { worker: text(workerId) } });
    track.handler = this.#add(track, { name: "handler", start: at, end: undefined, attributes: {} });
  }

  /** A stream chunk of `bytes` arrived. */
  chunk(job: JobView, bytes: number): void {
    const track = this.#track(job);
    const now = this.#now();
    track.stream ??= this.#add(track, {
      name: "stream",
      start: now,
      end: now,
      attributes: { chunks: 0, bytes: 0 },
    });
    if (track.stream === undefined) return;
    track.stream.end = now;
    track.stream.attributes["chunks"] = Number(track.stream.attributes["chunks"]) + 1;
    track.stream.attributes["bytes"] = Number(track.stream.attributes["bytes"]) + bytes;
  }

  /** A progress update arrived. */
  progress(job: JobView): void {
    const track = this.#track(job);
    const now = this.#now();
    track.progress ??= this.#add(track, {
      name: "progress",
      start: now,
      end: now,
      attributes: { updates: 0 },
    });
    if (track.progress === undefined) return;
    track.progress.end = now;
    track.progress.attributes["updates"] = Number(track.progress.attributes["updates"]) + 1;
  }

  /** The job ended (its result, a cancel, a timeout, a lapse). */
  ended(job: JobView): void {
    const track = this.#track(job);
    track.status = job.status;
    const at = job.finishedAt ?? this.#now();
    if (track.queue !== undefined) track.queue.end = at;
    if (track.handler !== undefined) track.handler.end = at;
    track.queue = undefined;
    track.handler = undefined;
    this.#add(track, {
      name: "result",
      start: at,
      end: at,
      attributes: { status: job.status, ...(job.error === undefined ? {} : { error: text(job.error) }) },
    });
  }
}
