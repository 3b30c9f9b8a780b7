import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { settle } from "../../task-sink.js";
import { type Clock, type ClockTimer, realClock, TimerSet } from "../clock.js";
import { newestStoppable } from "../fleet/surplus.js";
import type { StartupUpdate } from "../fleet/worker-startup.js";
import type { EndpointWorkerView } from "../management-api/route-context.js";
import type { SpawnedWorker, WorkerSpawner } from "../options.js";
import type { LoadBalancer } from "./load-balancer.js";

/**
 * The workers the harness starts for one load-balancing endpoint (one created through the
 * management copy with `type: LOAD_BALANCER`): each is the handler in load-balancing mode
 * (`RUNLET_MODE=lb`) on a loopback port of its own, joined to the endpoint's {@link LoadBalancer}
 * at once (it routes to it once its health says 200). `minWorkers` start at once and are kept; a
 * request that finds no free worker starts another, up to `maxWorkers`, one at a time (not within
 * `restartDelayMs` of a worker that ended before it was ready: a handler that cannot start is not
 * restarted at every look of a waiting request). A worker
 * that ends on its own leaves routing and, below `minWorkers`, is replaced after a pause;
 * `replace()` swaps one for a fresh one (a release rolling out). `update()` changes the bounds and
 * the concurrency of workers started from then on. With `idleTimeoutMs`, a worker above
 * `minWorkers` that has had no request in flight for that long (on the fleet's clock) is stopped,
 * newest first, as the platform scales idle workers down; without one, workers are not scaled down
 * while the endpoint lives. A lowered `maxWorkers` stops those above it with no request in flight,
 * and a busy one once its requests are done. A worker being stopped leaves routing first, so a
 * request arriving meanwhile goes to another worker or starts one. `close()` stops them all.
 */

/** Options of {@link LbFleet}. */
export interface LbFleetOptions {
  /** Starts one worker from the environment it is given (RUNLET_MODE, PORT, RUNLET_LB_HOST, RUNPOD_*). */
  readonly spawn: WorkerSpawner;
  /** Workers started at once and kept. @default 0 */
  readonly minWorkers?: number;
  /** Most workers at a time. @default max(1, minWorkers) */
  readonly maxWorkers?: number;
  /** Requests one worker takes at once (the endpoint's REQUEST_COUNT scaling). @default 1 */
  readonly concurrency?: number;
  /** The interface the workers bind. @default "127.0.0.1" */
  readonly host?: string;
  /** Pause before a worker that ended on its own is replaced, ms. @default 1_000 */
  readonly restartDelayMs?: number;
  /** Receives a worker that could not be started or stopped. @default ignore */
  readonly onError?: (err: unknown) => void;
  /**
   * A worker above `minWorkers` with no request in flight for this long (since its last request
   * ended, or since the fleet first saw it ready) is stopped, ms. @default none: workers are not
   * scaled down
   */
  readonly idleTimeoutMs?: number;
  /** Times {@link idleTimeoutMs} (the harness's clock). @default the real clock */
  readonly clock?: Clock;
}

interface Slot {
  readonly id: string;
  readonly startedAt: number;
  /** The spawner's last start-up report (`ready` once it said so). */
  state: StartupUpdate["type"];
  worker: SpawnedWorker | undefined;
  /** Settles once the spawner answered (or failed). */
  launched: Promise<void>;
  closing: Promise<void> | undefined;
  /** Since when (fleet clock, ms) it has had no request in flight: its last request's end, or when a sweep last found it not ready. */
  idleFrom: number;
}

/** A free TCP port on `host`, for one worker to bind (if another process takes it first, that worker fails to bind, exits and is replaced). */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The workers of one load-balancing endpoint. */
export class LbFleet {
  readonly #balancer: LoadBalancer;
  readonly #spawn: WorkerSpawner;
  #min: number;
  #max: number;
  /** Given to each worker as it starts. */
  #concurrency: number;
  readonly #host: string;
  readonly #restartDelayMs: number;
  readonly #onError: (err: unknown) => void;
  readonly #slots = new Map<string, Slot>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #clock: Clock;
  /** The one idle timer (cleared on close). */
  readonly #idleTimers: TimerSet;
  #idleTimer: ClockTimer | undefined;
  #idleTimeoutMs: number | undefined;
  /** When a worker last ended before it was seen ready (ms since the epoch): demand waits `restartDelayMs` after it. */
  #failedAt = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(balancer: LoadBalancer, options: LbFleetOptions) {
    this.#balancer = balancer;
    this.#spawn = options.spawn;
    this.#min = options.minWorkers ?? 0;
    this.#max = Math.max(1, this.#min, options.maxWorkers ?? 1);
    this.#concurrency = options.concurrency ?? 1;
    this.#host = options.host ?? "127.0.0.1";
    this.#restartDelayMs = options.restartDelayMs ?? 1_000;
    this.#onError = options.onError ?? (() => undefined);
    this.#clock = options.clock ?? realClock();
    this.#idleTimers = new TimerSet(this.#clock);
    this.#idleTimeoutMs = options.idleTimeoutMs;
    for (let i = 0; i < this.#min; i++) this.#start();
  }

  /** A request found no free worker: start one when none is starting and there is room. */
  demand(): void {
    // Workers still winding down count: no start while the fleet is at its maximum with them.
    if (this.#closed || this.#slots.size >= this.#max) return;
    // A handler that cannot start is not restarted at every look of a waiting request.
    if (Date.now() - this.#failedAt < this.#restartDelayMs) return;
    const members = new Map(this.#balancer.workers().map((w) => [w.id, w]));
    const starting = [...this.#slots.values()].some((s) => members.get(s.id)?.health !== "ready");
    if (!starting) this.#start();
  }

  /**
   * Changes the bounds (callers check `0 ≤ minWorkers ≤ maxWorkers`, `maxWorkers ≥ 1`) and the
   * requests each worker started from now on takes at once (running ones keep theirs). A raised
   * minimum starts workers now; a raised maximum lets waiting requests start more; a lowered one
   * stops the workers above it that have no request in flight (newest first), and each busy one
   * above it once its last request ends ({@link idle}).
   */
  update(change: {
    readonly minWorkers?: number | undefined;
    readonly maxWorkers?: number | undefined;
    readonly concurrency?: number | undefined;
    /** null: no scale-down from now on. */
    readonly idleTimeoutMs?: number | null | undefined;
  }): void {
    if (this.#closed) return;
    if (change.minWorkers !== undefined) this.#min = change.minWorkers;
    if (change.maxWorkers !== undefined) this.#max = Math.max(1, this.#min, change.maxWorkers);
    if (change.concurrency !== undefined) this.#concurrency = change.concurrency;
    if (change.idleTimeoutMs !== undefined) this.#idleTimeoutMs = change.idleTimeoutMs ?? undefined;
    this.#trim();
    for (let n = this.#active().length; n < this.#min; n++) this.#start();
    this.#sweepIdle();
  }

  /** The bounds, the concurrency new workers get, and the idle timeout (undefined: none). */
  get settings(): {
    minWorkers: number;
    maxWorkers: number;
    concurrency: number;
    idleTimeoutMs: number | undefined;
  } {
    return {
      minWorkers: this.#min,
      maxWorkers: this.#max,
      concurrency: this.#concurrency,
      idleTimeoutMs: this.#idleTimeoutMs,
    };
  }

  /**
   * Worker `workerId`'s last request in flight ended: its idle time starts now, and it is stopped
   * if the fleet is above its maximum.
   */
  idle(workerId?: string): void {
    if (this.#closed) return;
    const slot = workerId === undefined ? undefined : this.#slots.get(workerId);
    if (slot !== undefined) slot.idleFrom = this.#clock.now();
    this.#trim();
    this.#sweepIdle();
  }

  /**
   * With an idle timeout: stops the workers above the minimum that have had no request in flight
   * for it, newest first, and arms one timer for the next to fall due. A busy worker is skipped (its
   * last request's end calls {@link idle}); one not ready yet has its idle time start again, so a
   * worker is never stopped for the time it took to start.
   */
  #sweepIdle(): void {
    this.#idleTimers.clear(this.#idleTimer);
    this.#idleTimer = undefined;
    const timeout = this.#idleTimeoutMs;
    if (this.#closed || timeout === undefined) return;
    const now = this.#clock.now();
    const members = new Map(this.#balancer.workers().map((w) => [w.id, w]));
    const active = this.#active();
    let spare = active.length - this.#min;
    let due: number | undefined;
    for (const slot of active.reverse()) {
      if (spare <= 0) break;
      const m = members.get(slot.id);
      if (m !== undefined && m.inFlight > 0) continue;
      if (m?.health !== "ready") slot.idleFrom = now;
      if (now - slot.idleFrom >= timeout) {
        spare--;
        settle(this.#stop(slot), (err) => this.#onError(err));
      } else {
        due = Math.min(due ?? Number.POSITIVE_INFINITY, slot.idleFrom + timeout);
      }
    }
    if (due !== undefined) {
      this.#idleTimer = this.#idleTimers.set(() => {
        this.#idleTimer = undefined;
        this.#sweepIdle();
      }, due - now);
    }
  }

  /** Workers not being stopped. */
  #active(): Slot[] {
    return [...this.#slots.values()].filter((s) => s.closing === undefined);
  }

  /**
   * Stops workers above the maximum that have no request in flight, newest first (one starting
   * has none). The balancer counts a request on its worker in the same turn as it picks it, and
   * routes nothing to a worker once it leaves, so none gets a request while it winds down.
   */
  #trim(): void {
    const active = this.#active();
    const over = active.length - this.#max;
    if (over <= 0) return;
    const inFlight = new Map(this.#balancer.workers().map((w) => [w.id, w.inFlight]));
    const idle = (slot: Slot) => (inFlight.get(slot.id) ?? 0) === 0;
    for (const slot of newestStoppable(active, over, idle))
      settle(this.#stop(slot), (err) => this.#onError(err));
  }

  /**
   * Stops worker `id` so a fresh one takes its place (a new release rolling out): it leaves
   * routing at once and finishes its requests; below `minWorkers` another starts now, else the
   * next request that finds no free worker starts one.
   */
  replace(id: string): void {
    const slot = this.#slots.get(id);
    if (slot === undefined || slot.closing !== undefined || this.#closed) return;
    settle(this.#stop(slot), (err) => this.#onError(err));
    const active = [...this.#slots.values()].filter((s) => s.closing === undefined).length;
    if (active < this.#min) this.#start();
  }

  /** The workers as the management copy's `workers` and `releases` report them. */
  views(): EndpointWorkerView[] {
    const members = new Map(this.#balancer.workers().map((w) => [w.id, w]));
    return [...this.#slots.values()]
      .filter((s) => s.closing === undefined)
      .map((s) => {
        const m = members.get(s.id);
        const status =
          m?.health === "ready"
            ? m.inFlight > 0
              ? "RUNNING"
              : "IDLE"
            : m?.health === "unhealthy" && s.state === "ready"
              ? "UNHEALTHY"
              : "INITIALIZING";
        return { id: s.id, status, startedAt: s.startedAt };
      });
  }

  /** Stops every worker (each finishes its requests within its own grace). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#idleTimers.clearAll();
    this.#idleTimer = undefined;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    await Promise.all([...this.#slots.values()].map((s) => this.#stop(s)));
  }

  #start(): void {
    const id = `${this.#balancer.id}-${randomBytes(4).toString("hex")}`;
    const slot: Slot = {
      id,
      startedAt: Date.now(),
      state: "starting",
      worker: undefined,
      launched: Promise.resolve(),
      closing: undefined,
      idleFrom: this.#clock.now(),
    };
    this.#slots.set(id, slot);
    slot.launched = this.#launch(slot).catch((err: unknown) => {
      this.#onError(err);
      this.#ended(slot);
    });
    // A worker above the minimum that is never asked for anything is stopped too.
    this.#sweepIdle();
  }

  async #launch(slot: Slot): Promise<void> {
    const port = await freePort(this.#host);
    if (this.#closed || slot.closing !== undefined) return;
    const url = `http://${this.#host.includes(":") ? `[${this.#host}]` : this.#host}:${port}`;
    this.#balancer.addWorker({ id: slot.id, url, concurrency: this.#concurrency });
    const worker = await this.#spawn(
      {
        RUNLET_MODE: "lb",
        PORT: String(port),
        RUNLET_LB_HOST: this.#host,
        RUNPOD_ENDPOINT_ID: this.#balancer.id,
        RUNPOD_POD_ID: slot.id,
      },
      (update) => {
        slot.state = update.type;
      },
    );
    slot.worker = worker;
    // Stopped while it started: #stop closes it once this settles.
    if (slot.closing !== undefined || worker.exited === undefined) return;
    settle(
      worker.exited.then(
        () => this.#ended(slot),
        () => this.#ended(slot),
      ),
      (err) => this.#onError(err),
    );
  }

  /** A worker ended (on its own, or it could not start): out of routing, and replaced below the minimum. */
  #ended(slot: Slot): void {
    if (this.#slots.get(slot.id) !== slot) return;
    const seenReady =
      slot.state === "ready" ||
      this.#balancer.workers().some((w) => w.id === slot.id && w.health === "ready");
    if (!seenReady) this.#failedAt = Date.now();
    this.#slots.delete(slot.id);
    this.#balancer.removeWorker(slot.id);
    if (this.#closed || slot.closing !== undefined || this.#slots.size >= this.#min) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (!this.#closed && this.#slots.size < this.#min) this.#start();
    }, this.#restartDelayMs);
    timer.unref();
    this.#timers.add(timer);
  }

  #stop(slot: Slot): Promise<void> {
    slot.closing ??= (async () => {
      this.#balancer.removeWorker(slot.id);
      try {
        await slot.launched;
        await slot.worker?.close();
      } catch (err) {
        this.#onError(err);
      } finally {
        this.#slots.delete(slot.id);
      }
    })();
    return slot.closing;
  }
}
