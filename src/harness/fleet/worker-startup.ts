/**
 * What the harness knows of a worker's start-up from the spawner that started it (docs/harness.md,
 * "Workers starting"): an in-process worker's events, or a `runlet start` child's log lines
 * (`phase`, `setupProgress`, `worker ready`; docs/worker.md, "Start-up phases"). Pings cannot say
 * it: a worker pings while its setup runs, and a worker seen only through its requests would
 * count as idle.
 */

/** One step of a worker's start-up, as its spawner reports it. */
export type StartupUpdate =
  /** Spawned: starting until `ready` (a worker whose spawner reports nothing is ready once connected). */
  | { readonly type: "starting" }
  | {
      readonly type: "phase";
      readonly phase: string;
      readonly state: "started" | "done" | "failed";
      readonly ms?: number;
    }
  /** Setup's `progress(text)`. */
  | { readonly type: "progress"; readonly text: string }
  /** Start-up done: each phase's ms (`runlet`, `fitness`, `cache`, `sidecar`, `setup`, `total`). */
  | { readonly type: "ready"; readonly phases: Readonly<Record<string, number>> }
  /** The worker's process (or in-process worker) ended: never counted again. */
  | { readonly type: "exited" };

/** Tells the harness how a worker it started is getting on; the scaler passes one to each spawn. */
export type StartupReport = (update: StartupUpdate) => void;

/** A worker's start-up as the dashboard and `/health` see it. */
export interface WorkerStartup {
  /** `starting` until its `ready`; `exited` once it ended. */
  readonly state: "starting" | "ready" | "exited";
  /** The phase it is in now (`fitness`, `cache`, `sidecar`, `setup`), while starting. */
  readonly phase?: string;
  /** Setup's latest progress text, at most {@link MAX_PROGRESS_CHARS} characters. */
  readonly progress?: string;
  /** Each phase's ms, once ready. */
  readonly phases?: Readonly<Record<string, number>>;
}

/** Longest progress text kept, in characters (longer ones end with "…"). */
export const MAX_PROGRESS_CHARS = 200;
/** Most phases kept from one `ready` report, and the longest phase name. */
const MAX_PHASES = 16;
const MAX_PHASE_CHARS = 32;

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function phasesOf(value: unknown): Record<string, number> | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const phases: Record<string, number> = {};
  for (const [name, ms] of Object.entries(value).slice(0, MAX_PHASES)) {
    if (typeof ms === "number" && Number.isFinite(ms)) phases[clip(name, MAX_PHASE_CHARS)] = ms;
  }
  return phases;
}

/**
 * The start-up step a worker's log line reports (platform mode: one JSON object a line), or
 * undefined for any other line: `{phase, phaseState, ms}`, `{setupProgress}`, or the
 * `worker ready` line with its `phases`.
 */
export function startupUpdateOfRecord(
  record: Readonly<Record<string, unknown>> | undefined,
): StartupUpdate | undefined {
  if (record === undefined) return undefined;
  const { phase, phaseState, ms, setupProgress, phases, message } = record;
  if (
    typeof phase === "string" &&
    (phaseState === "started" || phaseState === "done" || phaseState === "failed")
  ) {
    return {
      type: "phase",
      phase: clip(phase, MAX_PHASE_CHARS),
      state: phaseState,
      ...(typeof ms === "number" ? { ms } : {}),
    };
  }
  if (typeof setupProgress === "string")
    return { type: "progress", text: clip(setupProgress, MAX_PROGRESS_CHARS) };
  if (message === "worker ready") return { type: "ready", phases: phasesOf(phases) ?? {} };
  return undefined;
}

/** {@link startupUpdateOfRecord} of one raw line (not JSON: undefined). */
export function startupUpdateOfLine(line: string): StartupUpdate | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
    return startupUpdateOfRecord(parsed as Record<string, unknown>);
  } catch {
    return undefined; // a handler's own output
  }
}

/** `current` after `update`. */
export function nextStartup(current: WorkerStartup | undefined, update: StartupUpdate): WorkerStartup {
  if (current?.state === "exited") return current;
  switch (update.type) {
    case "starting":
      return current ?? { state: "starting" };
    case "exited":
      return { state: "exited", ...(current?.phases === undefined ? {} : { phases: current.phases }) };
    case "ready":
      return { state: "ready", phases: phasesOf(update.phases) ?? {} };
    case "phase": {
      if (current?.state === "ready") return current;
      const { progress: _, phase: __, ...rest } = current ?? { state: "starting" as const };
      // Progress belongs to the phase that reported it (setup's); a new phase starts without.
      if (update.state === "started") return { ...rest, state: "starting", phase: update.phase };
      return { ...rest, state: "starting" };
    }
    case "progress": {
      if (current?.state === "ready") return current;
      return { ...(current ?? {}), state: "starting", progress: clip(update.text, MAX_PROGRESS_CHARS) };
    }
  }
}

/**
 * The start-up of every worker a spawner reports on, per endpoint. An entry lives while its worker
 * does: an exited worker's entry goes when the registry forgets the worker (it lapses) or at once
 * when it never connected, so the map is bounded by the workers the harness knows.
 */
export class WorkerStartups {
  readonly #byEndpoint = new Map<string, Map<string, WorkerStartup>>();

  /** Applies `update`; returns the new state. */
  report(endpointId: string, workerId: string, update: StartupUpdate): WorkerStartup {
    let workers = this.#byEndpoint.get(endpointId);
    if (workers === undefined) {
      workers = new Map();
      this.#byEndpoint.set(endpointId, workers);
    }
    const next = nextStartup(workers.get(workerId), update);
    workers.set(workerId, next);
    return next;
  }

  get(endpointId: string, workerId: string): WorkerStartup | undefined {
    return this.#byEndpoint.get(endpointId)?.get(workerId);
  }

  /** Every worker of an endpoint with its start-up. */
  entries(endpointId: string): Array<[string, WorkerStartup]> {
    return [...(this.#byEndpoint.get(endpointId)?.entries() ?? [])];
  }

  forget(endpointId: string, workerId: string): void {
    const workers = this.#byEndpoint.get(endpointId);
    workers?.delete(workerId);
    if (workers?.size === 0) this.#byEndpoint.delete(endpointId);
  }

  removeEndpoint(endpointId: string): void {
    this.#byEndpoint.delete(endpointId);
  }
}
