import type { ChildProcess } from "node:child_process";
import type { Logger } from "pino";
import { type Clock, realClock } from "../clock.js";
import type { SidecarSettings } from "../sidecar/options.js";
import { SidecarProcess } from "../sidecar/sidecar-process.js";
import { type DevSidecarMessage, isDevSidecarMessage, sidecarEnv } from "../sidecar/start-sidecars.js";
import { settle } from "../task-sink.js";

/**
 * `runlet dev`'s sidecars (docs/models.md, "Sidecars under runlet dev"): the worker processes ask
 * for their handler's sidecars over IPC instead of starting them, and `runlet dev` keeps each one
 * running across handler edits for as long as its settings stay the same, so a model server's
 * 30 s start is not paid per save. A sidecar whose settings changed (or that a new worker no longer
 * declares) is stopped and the new one started; one that dies is reported to every worker using it
 * (each fails its jobs and goes unfit, as in production), and the next worker starts it again.
 */

interface Entry {
  /** Its settings as JSON: the same text means the same sidecar. */
  readonly key: string;
  readonly proc: SidecarProcess;
  /** Undefined once ready; the failure's reason otherwise. */
  readonly ready: Promise<string | undefined>;
  /** The workers that asked for it and still run. */
  readonly users: Set<ChildProcess>;
}

/** Options of {@link DevSidecars}. */
export interface DevSidecarsOptions {
  /** Where the sidecars' lines (and runlet's lines about them) go. */
  readonly log: Logger;
  /** The environment sidecars inherit (`runlet dev` passes `process.env`; library code never reads it). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** @default the real clock */
  readonly clock?: Clock;
}

/** The sidecars `runlet dev` holds for its workers (see the file's summary). */
export class DevSidecars {
  readonly #options: DevSidecarsOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #closing = new AbortController();
  /** Starts and stops happen one request at a time, so two workers asking at once share one sidecar. */
  #turn: Promise<unknown> = Promise.resolve();
  #closed: Promise<void> | undefined;

  constructor(options: DevSidecarsOptions) {
    this.#options = options;
  }

  /** Serves a worker's requests (its IPC channel). */
  attach(child: ChildProcess): void {
    child.on("message", (message: unknown) => {
      if (!isDevSidecarMessage(message) || message.runlet !== "sidecars.ensure") return;
      settle(this.#ensure(child, message.sidecars), (err) => {
        this.#options.log.error({ err }, "runlet dev could not start the sidecars");
        send(child, { runlet: "sidecars.failed", reason: (err as Error)?.message ?? String(err) });
      });
    });
  }

  /** The sidecars running now, by name (for tests and messages). */
  names(): string[] {
    return [...this.#entries.keys()];
  }

  /** Stops every sidecar. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#closing.abort();
      await this.#turn.catch(() => undefined);
      await Promise.all([...this.#entries.values()].map((e) => e.proc.stop()));
      this.#entries.clear();
    })();
    return this.#closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #ensure(child: ChildProcess, wanted: readonly SidecarSettings[]): Promise<void> {
    const entries = await this.#inTurn(() => this.#startOrReuse(wanted));
    for (const entry of entries) {
      entry.users.add(child);
      child.once("exit", () => entry.users.delete(child));
    }
    const reasons = (await Promise.all(entries.map((e) => e.ready))).filter((r) => r !== undefined);
    send(
      child,
      reasons.length === 0
        ? { runlet: "sidecars.ready" }
        : { runlet: "sidecars.failed", reason: reasons[0]! },
    );
  }

  #inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(fn, fn);
    this.#turn = run.catch(() => undefined);
    return run;
  }

  async #startOrReuse(wanted: readonly SidecarSettings[]): Promise<Entry[]> {
    const names = new Set(wanted.map((s) => s.name));
    // Declared no more (the handler dropped or renamed it): stopped.
    await Promise.all(
      [...this.#entries].filter(([name]) => !names.has(name)).map(([name, e]) => this.#remove(name, e)),
    );
    const out: Entry[] = [];
    for (const settings of wanted) {
      const key = JSON.stringify(settings);
      const current = this.#entries.get(settings.name);
      if (current !== undefined && current.key === key && current.proc.exit === undefined) {
        this.#options.log.info(
          { sidecar: settings.name },
          `sidecar "${settings.name}" kept (its settings did not change)`,
        );
        out.push(current);
        continue;
      }
      if (current !== undefined) {
        this.#options.log.info(
          { sidecar: settings.name },
          `sidecar "${settings.name}" changed; restarting it`,
        );
        await this.#remove(settings.name, current);
      }
      out.push(this.#start(settings, key));
    }
    return out;
  }

  #start(settings: SidecarSettings, key: string): Entry {
    const { log, env, clock } = this.#options;
    const proc = new SidecarProcess({ settings, log, clock: clock ?? realClock(), baseEnv: sidecarEnv(env) });
    const ready = proc.waitReady(this.#closing.signal).then(
      () => undefined,
      (err: unknown) => {
        if (this.#entries.get(settings.name)?.proc === proc) this.#entries.delete(settings.name);
        settle(proc.stop(), (stopErr) =>
          log.warn({ err: stopErr, sidecar: settings.name }, "stopping the sidecar failed"),
        );
        return (err as Error)?.message ?? String(err);
      },
    );
    const entry: Entry = { key, proc, ready, users: new Set() };
    this.#entries.set(settings.name, entry);
    settle(
      proc.exited.then(async (exit) => {
        if (proc.stopping || (await ready) !== undefined) return;
        const reason = proc.reasonFor(exit, " while the worker ran");
        log.error({ sidecar: settings.name }, `${reason}; the next worker starts it again`);
        if (this.#entries.get(settings.name) === entry) this.#entries.delete(settings.name);
        for (const user of entry.users) send(user, { runlet: "sidecars.exited", reason });
      }),
      (err) => log.error({ err, sidecar: settings.name }, "following the sidecar's exit failed"),
    );
    return entry;
  }

  async #remove(name: string, entry: Entry): Promise<void> {
    if (this.#entries.get(name) === entry) this.#entries.delete(name);
    await entry.proc.stop();
  }
}

function send(child: ChildProcess, message: DevSidecarMessage): void {
  if (!child.connected) return;
  child.send(message, (err) => {
    // The worker exited meanwhile: it needs no answer.
    void err;
  });
}
