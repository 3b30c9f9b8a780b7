import type { Logger } from "pino";
import { settle } from "../../task-sink.js";
import type { JobStore } from "../jobs/job-store.js";
import type { SpawnedWorker, WorkerSpawner } from "../options.js";
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
 * to `maxWorkers`. Workers are not scaled down while the harness runs, but for a lowered
 * `maxWorkers` ({@link Scaler.resize}): the workers above it that hold no job are stopped, and a
 * busy one once it holds none. `close()` stops them all. A worker it stops (replaced after
 * `stopPod`, above a lowered maximum, its endpoint removed, the harness closing) is retired in the
 * store first, so no job is handed to it while it winds down.
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
    /** A worker is being stopped because it is above a lowered `maxWorkers`. @default ignore */
    onTrim?: (endpointId: string, podId: string) => void;
  }) {
    this.#store = options.store;
    this.#envFor = options.envFor;
    this.#logger = options.logger;
    this.#onStartup = options.onStartup;
    this.#startupOf = options.startupOf;
    this.#onTrim = options.onTrim ?? (() => undefined);
  }

  /** Registers an endpoint's spawner and starts its minimum. */
  add(
    endpointId: string,
    spawn: WorkerSpawner,
    minWorkers: number,
    maxWorkers: number,
    pingIntervalMs: number | undefined,
  ): void {
    this.#pools.set(endpointId, {
      spawn,
      minWorkers,
      maxWorkers,
      pingIntervalMs,
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
    let over = pool.slots.size - pool.maxWorkers;
    if (over <= 0) return;
    for (const slot of [...pool.slots.values()].reverse()) {
      if (over <= 0) break;
      if ((this.#store.workers.get(endpointId, slot.podId)?.jobs.size ?? 0) > 0) continue;
      pool.slots.delete(slot.podId);
      over--;
      // Retired now, not once its start resolved: a spawner may resolve only after the worker's
      // first take, and no job may be handed to it meanwhile.
      this.#store.retire(endpointId, slot.podId);
      this.#onTrim(endpointId, slot.podId);
      settle(
        slot.starting.then(() => this.#stop(endpointId, slot)),
        (err) => this.#logger?.error({ err, endpointId, podId: slot.podId }, "stopping a worker failed"),
      );
    }
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
