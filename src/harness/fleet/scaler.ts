import type { Logger } from "pino";
import { settle } from "../../task-sink.js";
import { type Clock, type ClockTimer, TimerSet } from "../clock.js";
import type { JobStore } from "../jobs/job-store.js";
import type { SpawnedWorker, WorkerSpawner } from "../options.js";
import { newestStoppable } from "./surplus.js";
import type { StartupUpdate, WorkerStartup } from "./worker-startup.js";

interface Slot {
  readonly podId: string;
  worker: SpawnedWorker | undefined;
  readonly starting: Promise<void>;
  /** Set once the worker has made a request (so it no longer counts as initializing). */
  seen: boolean;
}

interface Pool {
  readonly spawn: WorkerSpawner;
  /** Changed by {@link Scaler.resize}. */
  minWorkers: number;
  maxWorkers: number;
  readonly pingIntervalMs: number | undefined;
  /** A worker above `minWorkers` idle this long (harness clock, ms) is stopped; undefined: never. */
  idleTimeoutMs: number | undefined;
  /** The one timer that looks again when the next idle worker falls due. */
  idleTimer: ClockTimer | undefined;
  /** When {@link idleTimer} fires (harness clock, ms). */
  idleDue: number | undefined;
  readonly slots: Map<string, Slot>;
  next: number;
  /** After a failed start, no new start before this time (real ms), so a broken spawner cannot spin. */
  pausedUntil: number;
  /** Why the last start failed, reported by settled(). */
  lastError: unknown;
}

/**
 * Starts workers for endpoints that have a spawner: `minWorkers` at once, then one more each time
 * a job that is not `lowPriority` waits with no free worker (no held job-take, none starting), up
 * to `maxWorkers`. With an `idleTimeoutMs`, a worker above `minWorkers` that has been connected
 * and held no job for that long (on the harness clock) is stopped, newest first, as the platform
 * scales idle workers down; without one, workers are not scaled down while the harness runs. A
 * lowered `maxWorkers` ({@link Scaler.resize}) stops the workers above it that hold no job, and a
 * busy one once it holds none. `close()` stops them all. A worker it stops (replaced after
 * `stopPod`, idle, above a lowered maximum, its endpoint removed, the harness closing) is retired
 * in the store first, so no job is handed to it while it winds down; a job that arrives meanwhile
 * waits for another worker, or starts one.
 */
export class Scaler {
  readonly #store: JobStore;
  readonly #envFor: (
    endpointId: string,
    podId: string,
    pingIntervalMs: number | undefined,
  ) => Record<string, string>;
  readonly #logger: Logger | undefined;
  readonly #onStartup: (endpointId: string, podId: string, update: StartupUpdate) => void;
  readonly #startupOf: (endpointId: string, podId: string) => WorkerStartup | undefined;
  readonly #onTrim: (endpointId: string, podId: string) => void;
  readonly #clock: Clock;
  /** The idle timers, one per endpoint at most; all cleared on close. */
  readonly #timers: TimerSet;
  readonly #pools = new Map<string, Pool>();
  readonly #scheduled = new Set<string>();
  #closed = false;

  constructor(options: {
    store: JobStore;
    envFor: (endpointId: string, podId: string, pingIntervalMs: number | undefined) => Record<string, string>;
    logger: Logger | undefined;
    /** A spawned worker's start-up step, as its spawner reports it (exits included). */
    onStartup: (endpointId: string, podId: string, update: StartupUpdate) => void;
    /** What the harness knows of a worker's start-up. */
    startupOf: (endpointId: string, podId: string) => WorkerStartup | undefined;
    /** A worker is being stopped because it is above a lowered `maxWorkers`, or idle. @default ignore */
    onTrim?: (endpointId: string, podId: string) => void;
    /** Times how long a worker has been idle (`idleTimeoutMs`). */
    clock: Clock;
  }) {
    this.#clock = options.clock;
    this.#timers = new TimerSet(options.clock);
    this.#store = options.store;
    this.#envFor = options.envFor;
    this.#logger = options.logger;
    this.#onStartup = options.onStartup;
    this.#startupOf = options.startupOf;
    this.#onTrim = options.onTrim ?? (() => undefined);
  }

  /**
   * Registers an endpoint's spawner and starts its minimum. With `idleTimeoutMs`, workers above
   * the minimum that have been idle that long are stopped.
   */
  add(
    endpointId: string,
    spawn: WorkerSpawner,
    minWorkers: number,
    maxWorkers: number,
    pingIntervalMs: number | undefined,
    idleTimeoutMs?: number,
  ): void {
    this.#pools.set(endpointId, {
      spawn,
      minWorkers,
      maxWorkers,
      pingIntervalMs,
      idleTimeoutMs,
      idleTimer: undefined,
      idleDue: undefined,
      slots: new Map(),
      next: 1,
      pausedUntil: 0,
      lastError: undefined,
    });
    // At once, not scheduled, so settled() right after sees the minimum starting.
    this.#evaluate(endpointId);
  }

  /**
   * Changes an endpoint's bounds (callers check `0 ≤ minWorkers ≤ maxWorkers`, `maxWorkers ≥ 1`):
   * a raised minimum starts workers at once, a raised maximum lets waiting jobs start more, and a
   * lowered maximum stops the workers above it that hold no job now (newest first) and each busy
   * one above it once its jobs are done. False when the endpoint has no spawner here.
   */
  resize(endpointId: string, minWorkers: number, maxWorkers: number): boolean {
    const pool = this.#pools.get(endpointId);
    if (pool === undefined) return false;
    pool.minWorkers = minWorkers;
    pool.maxWorkers = maxWorkers;
    // A start paused after a failure waits out its pause; trimming does not.
    this.#evaluate(endpointId);
    return true;
  }

  /**
   * Changes an endpoint's idle timeout (undefined: no scale-down from now on); a worker's idle
   * time so far counts against the new one. False when the endpoint has no spawner here.
   */
  setIdleTimeout(endpointId: string, idleTimeoutMs: number | undefined): boolean {
    const pool = this.#pools.get(endpointId);
    if (pool === undefined) return false;
    pool.idleTimeoutMs = idleTimeoutMs;
    if (idleTimeoutMs === undefined) {
      this.#timers.clear(pool.idleTimer);
      pool.idleTimer = undefined;
      pool.idleDue = undefined;
    }
    this.#evaluate(endpointId);
    return true;
  }

  /** An endpoint's bounds now, or undefined when it has no spawner here. */
  bounds(endpointId: string): { minWorkers: number; maxWorkers: number } | undefined {
    const pool = this.#pools.get(endpointId);
    return pool === undefined ? undefined : { minWorkers: pool.minWorkers, maxWorkers: pool.maxWorkers };
  }

  /**
   * Workers started and not ready yet: starting by their spawner's report (docs/harness.md,
   * "Workers starting"), or, when the spawner reports nothing, not connected yet.
   */
  initializing(endpointId: string): number {
    const pool = this.#pools.get(endpointId);
    if (pool === undefined) return 0;
    let n = 0;
    for (const slot of pool.slots.values()) {
      const startup = this.#startupOf(endpointId, slot.podId);
      if (startup !== undefined) {
        const connected = this.#store.workers.get(endpointId, slot.podId) !== undefined;
        // Starting, or ready and not connected yet (its first request is on its way).
        if (startup.state === "starting" || (startup.state === "ready" && !connected)) n++;
        continue;
      }
      if (!slot.seen && this.#store.workers.get(endpointId, slot.podId) !== undefined) slot.seen = true;
      if (!slot.seen) n++;
    }
    return n;
  }

  /** Whether the scaler started `podId` (and it has not ended). */
  started(endpointId: string, podId: string): boolean {
    return this.#pools.get(endpointId)?.slots.has(podId) ?? false;
  }

  /** Waits until every worker being started has started; rejects with the error of a start that failed. */
  async settled(endpointId: string): Promise<void> {
    const pool = this.#pools.get(endpointId);
    if (pool === undefined) return;
    await Promise.all([...pool.slots.values()].map((s) => s.starting));
    if (pool.lastError !== undefined) {
      const err = pool.lastError;
      pool.lastError = undefined;
      throw err;
    }
  }

  /** Re-evaluates an endpoint soon (coalesced: the store calls this on every queue change). */
  schedule(endpointId: string): void {
    if (this.#closed || !this.#pools.has(endpointId) || this.#scheduled.has(endpointId)) return;
    this.#scheduled.add(endpointId);
    setImmediate(() => {
      this.#scheduled.delete(endpointId);
      this.#evaluate(endpointId);
    });
  }

  /** A worker asked to be replaced (`stopPod`): stop it if the harness started it. */
  replace(endpointId: string, podId: string): void {
    const slot = this.#pools.get(endpointId)?.slots.get(podId);
    if (slot === undefined) return;
    this.#pools.get(endpointId)?.slots.delete(podId);
    settle(
      slot.starting.then(() => this.#stop(endpointId, slot)).finally(() => this.schedule(endpointId)),
      (err) => this.#logger?.error({ err, endpointId, podId }, "replacing a worker failed"),
    );
  }

  /** Forgets an endpoint's spawner and stops the workers it started; resolves once they have stopped. */
  async remove(endpointId: string): Promise<void> {
    const pool = this.#pools.get(endpointId);
    if (pool === undefined) return;
    this.#pools.delete(endpointId);
    this.#timers.clear(pool.idleTimer);
    pool.idleTimer = undefined;
    const slots = [...pool.slots.values()];
    pool.slots.clear();
    await Promise.allSettled(
      slots.map(async (s) => {
        await s.starting;
        await this.#stop(endpointId, s);
      }),
    );
  }

  /** Stops every started worker. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#timers.clearAll();
    const slots = [...this.#pools].flatMap(([endpointId, p]) =>
      [...p.slots.values()].map((s) => ({ endpointId, s })),
    );
    for (const p of this.#pools.values()) p.slots.clear();
    await Promise.allSettled(
      slots.map(async ({ endpointId, s }) => {
        await s.starting;
        await this.#stop(endpointId, s);
      }),
    );
  }

  #evaluate(endpointId: string): void {
    const pool = this.#pools.get(endpointId);
    if (pool === undefined || this.#closed) return;
    this.#trim(endpointId, pool);
    this.#idle(endpointId, pool);
    if (Date.now() < pool.pausedUntil) return;
    let want = Math.max(0, pool.minWorkers - pool.slots.size);
    const waiting = this.#store.table.queued(endpointId).filter((j) => j.policy?.lowPriority !== true).length;
    const free = this.#store.table.waitingTakes(endpointId) + this.initializing(endpointId);
    want = Math.max(want, waiting - free);
    want = Math.min(want, pool.maxWorkers - pool.slots.size);
    for (let i = 0; i < want; i++) this.#start(endpointId, pool);
  }

  /**
   * Stops workers above `maxWorkers` that hold no job, newest first (one starting holds none). A
   * worker's jobs are counted in the store the moment they are handed to it, and a stopped worker
   * is retired at once, so none is handed a job while it winds down.
   */
  #trim(endpointId: string, pool: Pool): void {
    const over = pool.slots.size - pool.maxWorkers;
    if (over <= 0) return;
    const idle = (slot: Slot) => (this.#store.workers.get(endpointId, slot.podId)?.jobs.size ?? 0) === 0;
    for (const slot of newestStoppable([...pool.slots.values()], over, idle))
      this.#retire(endpointId, pool, slot);
  }

  /**
   * With an idle timeout: stops the connected workers above `minWorkers` that have held no job
   * for it — since their last job was handed out or left them, or since their first job-take (the
   * store notes both; a worker still starting has made none) —
   * newest first, and arms one timer for the next to fall due. Called on every queue change (a
   * hand-out, a job's end, a held take) and when that timer fires.
   */
  #idle(endpointId: string, pool: Pool): void {
    const timeout = pool.idleTimeoutMs;
    if (timeout === undefined) return;
    const now = this.#clock.now();
    let due: number | undefined;
    let spare = pool.slots.size - pool.minWorkers;
    for (const slot of [...pool.slots.values()].reverse()) {
      if (spare <= 0) break;
      const worker = this.#store.workers.get(endpointId, slot.podId);
      // Not idle: busy, not connected, or still starting (no job-take yet).
      if (worker === undefined || worker.jobs.size > 0 || worker.firstTakeAt === undefined) continue;
      const since = Math.max(worker.firstTakeAt, worker.lastJobAt ?? Number.NEGATIVE_INFINITY);
      if (now - since >= timeout) {
        spare--;
        this.#logger?.info({ endpointId, podId: slot.podId, idleMs: now - since }, "stopping an idle worker");
        this.#retire(endpointId, pool, slot);
      } else {
        due = Math.min(due ?? Number.POSITIVE_INFINITY, since + timeout);
      }
    }
    if (due === pool.idleDue && pool.idleTimer !== undefined) return;
    this.#timers.clear(pool.idleTimer);
    pool.idleTimer = undefined;
    pool.idleDue = due;
    if (due === undefined) return;
    pool.idleTimer = this.#timers.set(() => {
      pool.idleTimer = undefined;
      pool.idleDue = undefined;
      this.#evaluate(endpointId);
    }, due - now);
  }

  /** Retires a worker in the store at once and stops it; the pool no longer counts it. */
  #retire(endpointId: string, pool: Pool, slot: Slot): void {
    pool.slots.delete(slot.podId);
    // Retired now, not once its start resolved: a spawner may resolve only after the worker's
    // first take, and no job may be handed to it meanwhile.
    this.#store.retire(endpointId, slot.podId);
    this.#onTrim(endpointId, slot.podId);
    settle(
      slot.starting.then(() => this.#stop(endpointId, slot)),
      (err) => this.#logger?.error({ err, endpointId, podId: slot.podId }, "stopping a worker failed"),
    );
  }

  #start(endpointId: string, pool: Pool): void {
    const podId = `${endpointId}-worker-${pool.next++}`;
    const env = this.#envFor(endpointId, podId, pool.pingIntervalMs);
    const slot: Slot = {
      podId,
      worker: undefined,
      seen: false,
      // A spawner that throws synchronously is treated like one that rejects.
      starting: Promise.resolve()
        .then(() => pool.spawn(env, (update) => this.#onStartup(endpointId, podId, update)))
        .then(
          (worker) => {
            slot.worker = worker;
            // Closed (or replaced) while starting: stop it at once.
            if (this.#closed || !pool.slots.has(podId)) {
              // #stop logs its own failure; this one only reaches a bug.
              settle(this.#stop(endpointId, slot), (err) =>
                this.#logger?.error({ err, endpointId, podId }, "stopping a worker failed"),
              );
            }
            // A worker that ends on its own is replaced, as the platform replaces a dead pod.
            if (worker.exited !== undefined) {
              settle(
                worker.exited.then(
                  () => this.#ended(endpointId, pool, slot),
                  () => this.#ended(endpointId, pool, slot),
                ),
                (err) => this.#logger?.error({ err, endpointId, podId }, "replacing an ended worker failed"),
              );
            }
          },
          (err: unknown) => {
            pool.slots.delete(podId);
            this.#onStartup(endpointId, podId, { type: "exited" });
            pool.pausedUntil = Date.now() + 1_000;
            pool.lastError = err;
            this.#logger?.error({ err, endpointId, podId }, "could not start a worker");
          },
        ),
    };
    pool.slots.set(podId, slot);
  }

  #ended(endpointId: string, pool: Pool, slot: Slot): void {
    // A dead worker is never counted again, whoever stopped it (docs/harness.md, "Workers starting").
    this.#onStartup(endpointId, slot.podId, { type: "exited" });
    if (this.#closed || pool.slots.get(slot.podId) !== slot) return;
    pool.slots.delete(slot.podId);
    slot.worker = undefined;
    this.#logger?.warn({ endpointId, podId: slot.podId }, "a worker ended on its own; starting another");
    this.schedule(endpointId);
  }

  /** Retires the worker in the store (no job is handed to it from now on), then closes it. */
  async #stop(endpointId: string, slot: Slot): Promise<void> {
    const worker = slot.worker;
    slot.worker = undefined;
    this.#store.retire(endpointId, slot.podId);
    try {
      await worker?.close();
    } catch (err) {
      this.#logger?.error({ err, podId: slot.podId }, "stopping a worker failed");
    }
  }
}
