import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { startupUpdateOfLine } from "../harness/fleet/worker-startup.js";
import type { SpawnedWorker, WorkerSpawner } from "../harness/index.js";
import { settle } from "../task-sink.js";
import { RUNLET_ROOT } from "./paths.js";
import { inheritedEnv, pipeLines } from "./worker-pool.js";

/** Options of {@link DevSpawner}. */
export interface DevSpawnerOptions {
  /** The handler module each worker runs (`runlet start <handler>`). */
  readonly handlerPath: string;
  /** Variables every worker gets besides the platform's. @default {} */
  readonly env?: Readonly<Record<string, string>>;
  /** Receives each line a worker prints, with its label (`<endpoint>/w<n>`). */
  readonly onLine: (label: string, line: string) => void;
  /**
   * Told of each worker about to be stopped (a reload, or the harness closing it), by its endpoint
   * and pod id, before it is signalled: `runlet dev` retires it in the harness
   * (`Harness.retireWorker`), so no job is handed to it from then on.
   */
  readonly onRetire?: (endpointId: string, podId: string) => void;
  /** How long a stopped worker may finish its jobs before it is killed, in ms. @default 30_000 */
  readonly stopGraceMs?: number;
  /** Given each worker process, spawned with an IPC channel (runlet dev's sidecars). @default no IPC channel */
  readonly ipc?: (child: ChildProcess) => void;
}

interface Child {
  readonly label: string;
  readonly endpointId: string;
  readonly podId: string;
  readonly process: ChildProcess;
  readonly exited: Promise<unknown>;
}

/**
 * The endpoint a worker is for: `RUNPOD_ENDPOINT_ID` (a load-balancing worker has no queue
 * variables), else the id in its job-take template, `.../v2/<endpoint>/job-take/...`.
 */
function endpointOf(env: Record<string, string>): string {
  const named = env["RUNPOD_ENDPOINT_ID"];
  if (named !== undefined && named !== "") return named;
  const match = /\/v2\/([^/]+)\/job-take\//.exec(env["RUNPOD_WEBHOOK_GET_JOB"] ?? "");
  return match?.[1] === undefined ? "endpoint" : decodeURIComponent(match[1]);
}

/**
 * The workers `runlet dev` gives endpoints created through the harness's management copy (a
 * `runlet deploy --base-url` against the dev harness): `runlet start <handler>` children the
 * harness's scaler (or, for a load-balancing endpoint, its fleet, whose environment sets
 * `RUNLET_MODE=lb` and `PORT`) starts and stops, their lines labelled like the main pool's. `reload()` retires
 * them (`onRetire`) and stops them gracefully; the scaler replaces them (with the new code) as jobs
 * wait.
 */
export class DevSpawner {
  readonly #options: DevSpawnerOptions;
  readonly #children = new Set<Child>();
  readonly #counters = new Map<string, number>();

  constructor(options: DevSpawnerOptions) {
    this.#options = options;
  }

  /** The spawner to give the harness (`managementSpawn`). */
  readonly spawn: WorkerSpawner = async (env, report) => {
    const endpointId = endpointOf(env);
    const n = (this.#counters.get(endpointId) ?? 0) + 1;
    this.#counters.set(endpointId, n);
    const label = `${endpointId}/w${n}`;
    const child = spawn(
      process.execPath,
      [join(RUNLET_ROOT, "bin", "runlet.mjs"), "start", this.#options.handlerPath],
      {
        // Platform mode (JSON lines), so each worker line is rendered as one readable line.
        env: { ...inheritedEnv(), ...this.#options.env, ...env, RUNPOD_ENDPOINT_ID: endpointId },
        stdio:
          this.#options.ipc === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", "pipe", "pipe", "ipc"],
      },
    );
    this.#options.ipc?.(child);
    report({ type: "starting" });
    pipeLines(child, (line) => {
      // Its start-up lines tell the harness when it is ready (docs/harness.md, "Workers starting").
      const update = startupUpdateOfLine(line);
      if (update !== undefined) report(update);
      this.#options.onLine(label, line);
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    const podId = env["RUNPOD_POD_ID"] ?? label;
    const entry: Child = { label, endpointId, podId, process: child, exited: once(child, "close") };
    this.#children.add(entry);
    const forget = () => this.#children.delete(entry);
    // Forgotten however its exit settles.
    settle(entry.exited.then(forget), forget);
    return this.#worker(entry);
  };

  /** Stops every worker it started (each finishes its jobs first); the harness starts new ones as needed. */
  async reload(): Promise<void> {
    await Promise.all([...this.#children].map((c) => this.#stop(c)));
  }

  #worker(child: Child): SpawnedWorker {
    let closing: Promise<void> | undefined;
    return {
      exited: child.exited,
      close: () => {
        closing ??= this.#stop(child);
        return closing;
      },
    };
  }

  async #stop(child: Child): Promise<void> {
    // Retired before it is signalled: no job is handed to it while it stops (see WorkerPool).
    this.#options.onRetire?.(child.endpointId, child.podId);
    const p = child.process;
    if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
    const timer = setTimeout(() => p.kill("SIGKILL"), this.#options.stopGraceMs ?? 30_000);
    try {
      await child.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
