import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { RunletError } from "../errors.js";
import { settle } from "../task-sink.js";
import type { CacheDir, WarmCacheSettings } from "./cache-options.js";
import { type HydrateTally, hydrateMirror } from "./hydrate.js";
import { type SyncTally, syncMirror } from "./sync.js";

/**
 * The warm cache (docs/fitness.md, "Warm cache"): folders of the container mirrored on the network
 * volume at `<volume>/.runlet-cache/<namespace>/`. `hydrate()` brings what is missing or newer on
 * the volume into the container (hydrate.ts); `sync()` sends what is missing or newer in the
 * container to the volume (sync.ts). Files under `smallFileBytes` travel packed in one archive (one
 * file to open on a network filesystem instead of thousands), larger ones are copied one by one,
 * `parallelCopies` at once. Every write goes to a temporary name and is renamed; the manifest is
 * written last and names its own archive; syncs of several workers take turns under a lock file.
 * Best-effort: a failure is one log line and a cold start, unless `strict`.
 */

/** What a hydrate or sync did. */
export interface CacheRun {
  /** `off`: no volume or no namespace; `cold`: nothing on the volume yet; `unchanged`: nothing to send. */
  readonly status: "off" | "cold" | "hydrated" | "unchanged" | "synced" | "failed";
  readonly files: number;
  readonly bytes: number;
  readonly ms: number;
  /** Why it was off or failed. */
  readonly reason?: string;
  /** Entries refused as unsafe (they would leave their folder or pass a symbolic link), when any. */
  readonly refused?: number;
  /** Hydrate: files the manifest lists that the volume lacks or holds changed, left cold, when any. */
  readonly missing?: number;
  /** Hydrate: files left cold because restoring them would take the disk below its threshold, when any. */
  readonly overBudget?: number;
}

/** What the worker passes from its own configuration. */
export interface WarmCacheLimits {
  /** The free share of a cached folder's disk a hydrate leaves: the fitness `disk` threshold (RUNPOD_MIN_DISK_PERCENT). @default 10 */
  readonly minDiskPercent?: number;
}

/** The fitness `disk` check's default threshold (docs/fitness.md). */
const DEFAULT_MIN_DISK_PERCENT = 10;

async function isDir(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isDirectory() === true;
}

const emptyHydrate = (): HydrateTally => ({ files: 0, bytes: 0, refused: 0, missing: 0, overBudget: 0 });

/** The warm cache of one worker. Create it with the handler's checked `warmCache` settings. */
export class WarmCache {
  readonly #settings: WarmCacheSettings;
  readonly #log: Logger;
  readonly #namespace: string | undefined;
  readonly #dirs: ReadonlyMap<string, CacheDir>;
  #syncing: Promise<CacheRun> | undefined;
  /** The one sync that runs after the current one, shared by every call made meanwhile. */
  #queued: Promise<CacheRun> | undefined;
  readonly #stop = new AbortController();

  readonly #minDiskPercent: number;

  constructor(
    settings: WarmCacheSettings,
    log: Logger,
    endpointId: string | undefined,
    limits: WarmCacheLimits = {},
  ) {
    this.#settings = settings;
    this.#minDiskPercent = limits.minDiskPercent ?? DEFAULT_MIN_DISK_PERCENT;
    this.#log = log.child({ warmCache: true });
    this.#namespace = settings.namespace ?? endpointId;
    this.#dirs = new Map(settings.dirs.map((d) => [d.name, d]));
  }

  /** The mirror's folder on the volume, or undefined without a namespace. */
  get root(): string | undefined {
    return this.#namespace === undefined
      ? undefined
      : join(this.#settings.volume, ".runlet-cache", this.#namespace);
  }

  async #off(): Promise<string | undefined> {
    if (this.#namespace === undefined) return "no namespace: set warmCache.namespace or RUNPOD_ENDPOINT_ID";
    if (!(await isDir(this.#settings.volume))) return `${this.#settings.volume} is not a mounted folder`;
    return undefined;
  }

  /**
   * Volume → container: copies what is missing or newer on the volume. `signal` (the worker's
   * closing) stops it between files: a shutdown does not wait for a whole hydrate. Never rejects
   * unless `strict`.
   */
  async hydrate(signal: AbortSignal = this.#stop.signal): Promise<CacheRun> {
    const started = performance.now();
    const ms = () => Math.round(performance.now() - started);
    const off = await this.#off();
    if (off !== undefined)
      return this.#report("hydrate", { status: "off", files: 0, bytes: 0, ms: ms(), reason: off });
    const bound = this.#settings.hydrateTimeoutMs;
    const late = new AbortController();
    const timer = setTimeout(
      () =>
        late.abort(new RunletError("RUNLET_WARM_CACHE_FAILED", `ran past hydrateTimeoutMs (${bound} ms)`)),
      bound,
    );
    const tally = emptyHydrate();
    try {
      const status = await hydrateMirror(
        {
          volume: this.#settings.volume,
          namespace: this.#namespace as string,
          dirs: this.#dirs,
          parallelCopies: this.#settings.parallelCopies,
          minDiskPercent: this.#minDiskPercent,
          signal: AbortSignal.any([signal, late.signal]),
        },
        tally,
      );
      if (status === "cold")
        return this.#report("hydrate", {
          status: "cold",
          files: 0,
          bytes: 0,
          ms: ms(),
          reason: "no manifest on the volume yet",
        });
      return this.#report("hydrate", {
        status: "hydrated",
        files: tally.files,
        bytes: tally.bytes,
        ms: ms(),
        ...(tally.refused > 0 ? { refused: tally.refused } : {}),
        ...(tally.missing > 0 ? { missing: tally.missing } : {}),
        ...(tally.overBudget > 0 ? { overBudget: tally.overBudget } : {}),
      });
    } catch (err) {
      const cause =
        late.signal.aborted && !signal.aborted
          ? new RunletError(
              "RUNLET_WARM_CACHE_FAILED",
              `ran past hydrateTimeoutMs (${bound} ms) with ${tally.files} file(s) restored; the rest stay cold`,
              { cause: err },
            )
          : err;
      return this.#failed("hydrate", cause, ms(), tally);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Container → volume: sends what is missing or newer in the container. One sync runs at a time;
   * a call during one runs once more after it (calls in between share that run). Never rejects,
   * `strict` or not: a failure is one log line and `status: "failed"`.
   */
  sync(): Promise<CacheRun> {
    if (this.#syncing === undefined) {
      this.#syncing = this.#syncOnce().finally(() => {
        this.#syncing = undefined;
      });
      return this.#syncing;
    }
    // After the running sync, whatever its outcome (under `strict` a failed one rejects): the queue
    // empties either way, so a later call is never handed this run's failure.
    const after = () => {
      this.#queued = undefined;
      return this.sync();
    };
    this.#queued ??= this.#syncing.then(after, after);
    return this.#queued;
  }

  /** Starts a sync in the background (after setup, without delaying jobs); its outcome is logged. */
  startSync(): void {
    settle(this.sync(), (err) => this.#log.warn({ err }, "warm cache sync failed"));
  }

  /** At shutdown: waits for a running sync and runs a last one, for at most `shutdownSyncMs`; then abandons it. */
  async close(): Promise<void> {
    const bound = this.#settings.shutdownSyncMs;
    let timer: NodeJS.Timeout | undefined;
    const last = this.sync().then(() => undefined);
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), bound);
    });
    try {
      if ((await Promise.race([last, timedOut])) === "timeout") {
        this.#stop.abort(
          new RunletError("RUNLET_WARM_CACHE_FAILED", `the last sync ran past shutdownSyncMs (${bound} ms)`),
        );
        this.#log.warn(
          { shutdownSyncMs: bound },
          `warm cache: the last sync ran past ${bound} ms (shutdownSyncMs) and was abandoned`,
        );
      }
    } catch (err) {
      this.#log.warn({ err }, "warm cache: the last sync failed");
    } finally {
      clearTimeout(timer);
    }
  }

  async #syncOnce(): Promise<CacheRun> {
    const started = performance.now();
    const ms = () => Math.round(performance.now() - started);
    const off = await this.#off();
    if (off !== undefined)
      return this.#report("sync", { status: "off", files: 0, bytes: 0, ms: ms(), reason: off });
    const tally: SyncTally = { files: 0, bytes: 0, refused: 0 };
    try {
      const status = await syncMirror(
        {
          volume: this.#settings.volume,
          namespace: this.#namespace as string,
          dirs: this.#settings.dirs,
          dirByName: this.#dirs,
          smallFileBytes: this.#settings.smallFileBytes,
          parallelCopies: this.#settings.parallelCopies,
          signal: this.#stop.signal,
          log: this.#log,
        },
        tally,
      );
      return this.#report("sync", {
        status,
        files: tally.files,
        bytes: tally.bytes,
        ms: ms(),
        ...(tally.refused > 0 ? { refused: tally.refused } : {}),
      });
    } catch (err) {
      return this.#failed("sync", err, ms());
    }
  }

  #report(what: "hydrate" | "sync", run: CacheRun): CacheRun {
    const mb = (run.bytes / 1_048_576).toFixed(1);
    let text =
      run.status === "off"
        ? `warm cache ${what}: off (${run.reason})`
        : run.status === "cold"
          ? `warm cache ${what}: cold start (${run.reason})`
          : `warm cache ${what}: ${run.status}, ${run.files} file(s), ${mb} MB in ${run.ms} ms`;
    const fields: Record<string, unknown> = {
      cache: what,
      status: run.status,
      files: run.files,
      bytes: run.bytes,
      ms: run.ms,
    };
    if (run.refused !== undefined) {
      fields["refused"] = run.refused;
      text += `; refused ${run.refused} entr(ies) that would leave their folder`;
    }
    if (run.missing !== undefined) {
      fields["missing"] = run.missing;
      text += `; left ${run.missing} file(s) cold (missing or changed on the volume)`;
    }
    if (run.overBudget !== undefined) {
      fields["overBudget"] = run.overBudget;
      text += `; left ${run.overBudget} file(s) cold (restoring them would leave less than ${this.#minDiskPercent} % of the disk free)`;
    }
    if (run.refused !== undefined || run.missing !== undefined || run.overBudget !== undefined)
      this.#log.warn(fields, text);
    else this.#log.info(fields, text);
    return run;
  }

  #failed(what: "hydrate" | "sync", err: unknown, ms: number, done?: HydrateTally): CacheRun {
    const reason = err instanceof Error ? err.message : String(err);
    // `strict` is about start-up (docs/fitness.md): a sync runs in the background, at shutdown and
    // on demand (`void worker.syncWarmCache()`), where a rejection would reach the process.
    if (this.#settings.strict && what === "hydrate") {
      throw new RunletError("RUNLET_WARM_CACHE_FAILED", `warm cache ${what} failed: ${reason}`, {
        cause: err,
      });
    }
    this.#log.warn(
      { cache: what, status: "failed", ms, err },
      `warm cache ${what} failed (${reason}); ${what === "hydrate" ? "a cold start" : "the volume keeps its previous copy"}`,
    );
    return { status: "failed", files: done?.files ?? 0, bytes: done?.bytes ?? 0, ms, reason };
  }
}
