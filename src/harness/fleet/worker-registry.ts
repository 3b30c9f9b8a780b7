import { KeyedWaiters } from "../../wait.js";
import type { Clock, ClockTimer, TimerSet } from "../clock.js";
import type { WorkerStartup } from "./worker-startup.js";

/** One worker (pod) as the harness knows it, from the requests it makes. */
export interface WorkerState {
  readonly id: string;
  readonly endpointId: string;
  readonly firstSeenAt: number;
  /** Its first job-take (it was ready then): the end of a first job's setup span (job-timeline.ts). */
  firstTakeAt: number | undefined;
  /** Its latest request of any kind (informational: only pings keep a worker alive). */
  lastSeenAt: number;
  /** Its latest ping; undefined until it pings. */
  lastPingAt: number | undefined;
  /** Ids of the jobs it holds (IN_PROGRESS). */
  readonly jobs: Set<string>;
  /**
   * When it was last handed a job or last let one go (ended, stopped, requeued), on the harness
   * clock; undefined until its first job. With no job held, it has been idle since then (or since
   * it appeared): the scaler's idle timeout reads it.
   */
  lastJobAt: number | undefined;
  /**
   * For each held job its pings do not list (yet, or any more): since when, on the harness clock —
   * the hand-out, or the first ping that left out a job an earlier ping listed. See {@link WorkerRegistry.pinged}.
   */
  readonly unlistedSince: Map<string, number>;
  /** Job ids its next job-stop poll answers with. */
  pendingStops: string[];
  /** From its last ping. */
  lastPing: { readonly jobIds: readonly string[]; readonly version: string | undefined } | undefined;
  /** Set when it pinged `status=unhealthy`. */
  unhealthy: string | undefined;
  lapseTimer: ClockTimer | undefined;
}

/** What happened to a worker: it made its first request, it pinged, or it lapsed (no ping in time). */
export type WorkerChange = "seen" | "ping" | "lapsed";

/** A held job its worker's pings have left out for `heartbeatTimeoutMs` or more. */
export interface UnlistedJob {
  readonly jobId: string;
  /** How long its pings have left it out, ms (≥ `heartbeatTimeoutMs`). */
  readonly unlistedMs: number;
}

/** Counts of workers for `/health` (docs/protocol.md, "Job API"; the official JS client types every field). */
export type WorkerCounts = {
  /** Connected and ready, holding no job. */
  readonly idle: number;
  /** Connected, holding at least one job. */
  readonly running: number;
  /**
   * Started and not ready yet: connected or not, still in its start-up (fitness checks, setup;
   * docs/harness.md, "Workers starting"), or started by the scaler and not connected yet.
   */
  readonly initializing: number;
  /** Connected and able to take work: the same as idle here. */
  readonly ready: number;
  /** Always 0: the harness never throttles a worker. */
  readonly throttled: number;
  /** Connected workers that reported `status=unhealthy` on a ping. */
  readonly unhealthy: number;
};

/**
 * The workers of every endpoint, keyed by endpoint then worker id. A worker appears with its first
 * request and disappears when it lapses: no ping for `heartbeatTimeoutMs` since its last ping (or
 * since it appeared). Only pings count (docs/protocol.md, "Heartbeat": when pings stop, the platform declares
 * the worker dead): a worker that takes jobs and holds its job-stop poll open but never pings is as
 * dead as a silent one, since its heartbeat is what the platform watches.
 *
 * A worker that pings can still lose a job: the ping's `job_id` list is how the platform knows what
 * a worker runs (docs/protocol.md, "Taking jobs" and "Heartbeat"), and a restarted process pinging under the same id no
 * longer lists a job its predecessor took. A held job that none of its worker's pings has listed for
 * `heartbeatTimeoutMs` — since the hand-out, or since the first ping that left it out after one
 * listed it — is reported lost by the ping that finds it so.
 */
export class WorkerRegistry {
  readonly #timers: TimerSet;
  readonly #now: () => number;
  readonly #heartbeatTimeoutMs: number;
  readonly #requestsKeepAlive: boolean;
  readonly #onLapse: (worker: WorkerState) => void;
  readonly #onJobsLost: (worker: WorkerState, jobs: readonly UnlistedJob[]) => void;
  readonly #onChange: ((worker: WorkerState, change: WorkerChange) => void) | undefined;
  readonly #byEndpoint = new Map<string, Map<string, WorkerState>>();
  /** Held job-stop polls, keyed by the worker that holds them. */
  readonly #stopPolls: KeyedWaiters<WorkerState>;

  constructor(options: {
    timers: TimerSet;
    /** Times held job-stop polls (real time in the harness: a worker holds a connection). @default real timers */
    holdClock?: Clock;
    now: () => number;
    heartbeatTimeoutMs: number;
    /**
     * Until a worker's first ping, any request of its own re-arms its lapse: in memory (a harness
     * without a socket) a worker has no heartbeat thread to ping with. @default false
     */
    requestsKeepAlive?: boolean;
    onLapse: (worker: WorkerState) => void;
    onJobsLost: (worker: WorkerState, jobs: readonly UnlistedJob[]) => void;
    /** Told when a worker appears, pings or lapses (the dashboard's live worker list). */
    onChange?: (worker: WorkerState, change: WorkerChange) => void;
  }) {
    this.#timers = options.timers;
    this.#now = options.now;
    this.#heartbeatTimeoutMs = options.heartbeatTimeoutMs;
    this.#requestsKeepAlive = options.requestsKeepAlive ?? false;
    this.#onLapse = options.onLapse;
    this.#onJobsLost = options.onJobsLost;
    this.#onChange = options.onChange;
    this.#stopPolls = new KeyedWaiters(options.holdClock);
  }

  /** The worker, if it is connected. */
  get(endpointId: string, workerId: string): WorkerState | undefined {
    return this.#byEndpoint.get(endpointId)?.get(workerId);
  }

  /** The connected workers of an endpoint. */
  list(endpointId: string): WorkerState[] {
    return [...(this.#byEndpoint.get(endpointId)?.values() ?? [])];
  }

  /**
   * A request by this worker: registers it on first sight, which starts its heartbeat clock (a
   * worker that never pings lapses `heartbeatTimeoutMs` after it appeared). Other requests do not
   * re-arm the lapse (see {@link pinged}), but with `requestsKeepAlive` those of a worker that has
   * not pinged yet do.
   */
  seen(endpointId: string, workerId: string, taking = false): WorkerState {
    let workers = this.#byEndpoint.get(endpointId);
    if (workers === undefined) {
      workers = new Map();
      this.#byEndpoint.set(endpointId, workers);
    }
    let worker = workers.get(workerId);
    if (worker === undefined) {
      worker = {
        id: workerId,
        endpointId,
        firstSeenAt: this.#now(),
        firstTakeAt: undefined,
        lastSeenAt: this.#now(),
        lastPingAt: undefined,
        jobs: new Set(),
        lastJobAt: undefined,
        unlistedSince: new Map(),
        pendingStops: [],
        lastPing: undefined,
        unhealthy: undefined,
        lapseTimer: undefined,
      };
      workers.set(workerId, worker);
      this.#arm(worker);
      this.#onChange?.(worker, "seen");
    } else if (this.#requestsKeepAlive && worker.lastPingAt === undefined) {
      this.#arm(worker);
    }
    worker.lastSeenAt = this.#now();
    if (taking) worker.firstTakeAt ??= worker.lastSeenAt;
    return worker;
  }

  /**
   * A job handed to a connected worker: it holds the job, and its pings must list it within
   * `heartbeatTimeoutMs` from now.
   */
  handOut(endpointId: string, workerId: string, jobId: string): void {
    const worker = this.get(endpointId, workerId);
    if (worker === undefined) return;
    worker.jobs.add(jobId);
    worker.lastJobAt = this.#now();
    worker.unlistedSince.set(jobId, this.#now());
  }

  /**
   * A ping from the worker, listing `jobIds`: the only thing that proves it alive; its lapse restarts
   * from now. Held jobs it lists are fine; one it leaves out after a ping listed it starts its
   * countdown now; one left out for `heartbeatTimeoutMs` or more is lost (`onJobsLost`).
   */
  pinged(worker: WorkerState, jobIds: readonly string[]): void {
    const now = this.#now();
    worker.lastPingAt = now;
    // A ping from a worker that lapsed while this request was on its way does not revive the old
    // state; its next request registers it afresh.
    if (this.get(worker.endpointId, worker.id) !== worker) return;
    this.#arm(worker);
    // Jobs it no longer holds (ended, stopped, requeued) leave the countdowns.
    for (const id of worker.unlistedSince.keys()) if (!worker.jobs.has(id)) worker.unlistedSince.delete(id);
    const listed = new Set(jobIds);
    const lost: UnlistedJob[] = [];
    for (const id of worker.jobs) {
      const since = worker.unlistedSince.get(id);
      if (listed.has(id)) worker.unlistedSince.delete(id);
      else if (since === undefined) worker.unlistedSince.set(id, now);
      else if (now - since >= this.#heartbeatTimeoutMs) lost.push({ jobId: id, unlistedMs: now - since });
    }
    if (lost.length > 0) this.#onJobsLost(worker, lost);
    this.#onChange?.(worker, "ping");
  }

  /** The worker no longer holds the job (it ended, was requeued or lost): noted in {@link WorkerState.lastJobAt}. */
  drop(worker: WorkerState | undefined, jobId: string): void {
    if (worker === undefined || !worker.jobs.delete(jobId)) return;
    worker.lastJobAt = this.#now();
  }

  /** Asks the worker to stop a job through its next (or held) job-stop poll. */
  requestStop(endpointId: string, workerId: string, jobId: string): void {
    const worker = this.get(endpointId, workerId);
    if (worker === undefined) return;
    this.drop(worker, jobId);
    worker.unlistedSince.delete(jobId);
    if (!worker.pendingStops.includes(jobId)) worker.pendingStops.push(jobId);
    this.#stopPolls.wake(worker);
  }

  /** A worker's job-stop poll: the ids to stop, at once or within `holdMs` (real time), else none. */
  async stopPoll(worker: WorkerState, holdMs: number, signal: AbortSignal): Promise<string[]> {
    if (worker.pendingStops.length > 0) return worker.pendingStops.splice(0);
    await this.#stopPolls.wait(worker, holdMs, signal);
    // A worker that hung up gets nothing: the stops stay for its next poll.
    return signal.aborted ? [] : worker.pendingStops.splice(0);
  }

  /** How many job-stop polls are held (for tests that hold the harness to its bounds). */
  get heldStopPolls(): number {
    return this.#stopPolls.size;
  }

  /**
   * Counts for `/health`; `initializing` counts the workers starting (from the scaler and the
   * spawners' reports). A connected worker whose `startupOf` is `starting` is left to that count;
   * one whose process `exited` is not counted at all.
   */
  counts(
    endpointId: string,
    initializing: number,
    startupOf: (workerId: string) => WorkerStartup | undefined = () => undefined,
  ): WorkerCounts {
    let idle = 0;
    let running = 0;
    let unhealthy = 0;
    for (const w of this.list(endpointId)) {
      const startup = startupOf(w.id)?.state;
      if (startup === "exited") continue;
      if (w.unhealthy !== undefined) unhealthy++;
      if (startup === "starting") continue;
      if (w.jobs.size > 0) running++;
      else idle++;
    }
    return { idle, running, initializing, ready: idle, throttled: 0, unhealthy };
  }

  /** Forgets the workers of one endpoint: lapse timers cancelled, held job-stop polls answered. */
  removeEndpoint(endpointId: string): void {
    for (const w of this.#byEndpoint.get(endpointId)?.values() ?? []) {
      this.#timers.clear(w.lapseTimer);
      this.#stopPolls.wake(w);
    }
    this.#byEndpoint.delete(endpointId);
  }

  /** Forgets every worker and cancels their lapse timers. */
  clear(): void {
    for (const endpointId of [...this.#byEndpoint.keys()]) this.removeEndpoint(endpointId);
  }

  #arm(worker: WorkerState): void {
    this.#timers.clear(worker.lapseTimer);
    worker.lapseTimer = this.#timers.set(() => this.#lapse(worker), this.#heartbeatTimeoutMs);
  }

  /** No ping for `heartbeatTimeoutMs`, whatever else it sent or holds open: the worker is dead. */
  #lapse(worker: WorkerState): void {
    worker.lapseTimer = undefined;
    this.#byEndpoint.get(worker.endpointId)?.delete(worker.id);
    // Its held job-stop poll answers now: the jobs it would name are no longer its own.
    worker.pendingStops = [];
    this.#stopPolls.wake(worker);
    this.#onLapse(worker);
    this.#onChange?.(worker, "lapsed");
  }
}
