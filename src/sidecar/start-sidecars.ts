import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import { onAbort } from "../linked-signal.js";
import { settle } from "../task-sink.js";
import type { SidecarSettings } from "./options.js";
import type { SidecarProcess } from "./sidecar-process.js";

/**
 * Step 3 of the worker's start-up (docs/models.md, "Start-up phases"): the handler's sidecars are
 * started and waited for before `setup` and the first take. A sidecar that dies or does not
 * answer makes the worker unfit (`check=sidecar`); one that dies later fails the running jobs
 * with its exit and makes the worker unfit; at shutdown, after the running jobs, they are stopped.
 *
 * Under `runlet dev` (RUNLET_DEV_SIDECARS=ipc and an IPC channel to the parent) the sidecars
 * belong to `runlet dev` instead, which keeps them across handler edits; the worker asks for them
 * and is told when one dies (dev-sidecars.ts).
 */

/** The unhealthy check name a sidecar failure pings with. */
export const SIDECAR_CHECK = "sidecar";
/** Set by `runlet dev` on its workers: the parent process owns the sidecars. */
export const DEV_SIDECARS_ENV = "RUNLET_DEV_SIDECARS";

/** What {@link startSidecars} works with, all the worker's. */
export interface StartSidecarsDeps {
  /** The definition's checked sidecars (`definition.sidecars`); none: nothing is started. */
  readonly sidecars: readonly SidecarSettings[];
  readonly log: Logger;
  /** Times readiness (its probes' pauses and `readyTimeoutMs`). */
  readonly clock: Clock;
  /** The worker's closing signal: a close during start-up stops what was started. */
  readonly closing: AbortSignal;
  /** The worker's `env` option: added over `baseEnv` (and read for RUNLET_DEV_SIDECARS). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /**
   * What sidecars inherit beneath `env` (their own `env` is added over both): the caller's, usually
   * `process.env` (the worker's `sidecarBaseEnv` option). Library code never reads `process.env`.
   */
  readonly baseEnv: Readonly<Record<string, string | undefined>>;
  /** The worker's unfit path (its lifecycle's `unfit`): ping unhealthy with the check and reason, stop, exit 1. */
  readonly unfit: (check: string, reason: string) => Promise<void>;
  /** Fails every running job with `reason` (their handlers are aborted with it). */
  readonly failRunningJobs: (reason: string) => void;
}

/** The sidecars of a running worker. */
export interface RunningSidecars {
  /** Each sidecar's base URL by name. */
  readonly urls: Readonly<Record<string, string>>;
  /** Stops them (after the running jobs: call it once they ended). Idempotent. */
  close(): Promise<void>;
}

const NONE: RunningSidecars = Object.freeze({ urls: Object.freeze({}), close: () => Promise.resolve() });

/** A message between a dev worker and `runlet dev` about sidecars. */
export type DevSidecarMessage =
  | { readonly runlet: "sidecars.ensure"; readonly sidecars: readonly SidecarSettings[] }
  | { readonly runlet: "sidecars.ready" }
  | { readonly runlet: "sidecars.failed"; readonly reason: string }
  | { readonly runlet: "sidecars.exited"; readonly reason: string };

/** True when `value` is a {@link DevSidecarMessage} (IPC carries anything). */
export function isDevSidecarMessage(value: unknown): value is DevSidecarMessage {
  const kind = (value as { runlet?: unknown } | null)?.runlet;
  return typeof kind === "string" && kind.startsWith("sidecars.");
}

/**
 * Starts the definition's sidecars and waits until each answers. Resolves with them, or with
 * undefined when the worker must not take jobs: a sidecar failed (the worker was declared unfit
 * with `check=sidecar` and the reason) or the worker closed meanwhile (what was started is stopped).
 *
 * @example
 * // in the worker's start-up, after the fitness checks and before setup:
 * const sidecars = await startSidecars({ sidecars: definition.sidecars, log, clock, closing, env, baseEnv, unfit, failRunningJobs });
 * if (sidecars === undefined) return; // unfit or closing: take nothing
 */
export async function startSidecars(deps: StartSidecarsDeps): Promise<RunningSidecars | undefined> {
  if (deps.sidecars.length === 0) return NONE;
  if (deps.closing.aborted) return undefined;
  const began = deps.clock.now();
  const running =
    deps.env[DEV_SIDECARS_ENV] === "ipc" && typeof process.send === "function"
      ? await viaDevParent(deps)
      : await ownSidecars(deps);
  if (running !== undefined) {
    const ms = deps.clock.now() - began;
    deps.log.info({ sidecars: Object.keys(running.urls), ms }, "sidecars ready");
  }
  return running;
}

/** The worker's API key: a model server has no use for it, and might log its environment. */
const WITHHELD = ["RUNPOD_AI_API_KEY"];

/**
 * What a sidecar inherits: `baseEnv`, the caller's environment (`process.env` under `runlet start`,
 * a bundle and `runlet dev`: PATH, HOME, CUDA_VISIBLE_DEVICES, a token for the model hub), then the
 * worker's `env` option over it (the same object under `runlet start`; in tests, the harness's
 * variables), without the worker's API key.
 */
export function sidecarEnv(
  baseEnv: Readonly<Record<string, string | undefined>>,
  workerEnv: Readonly<Record<string, string | undefined>> = {},
): Record<string, string | undefined> {
  const env = { ...baseEnv, ...workerEnv };
  for (const name of WITHHELD) delete env[name];
  return env;
}

function urlsOf(sidecars: readonly SidecarSettings[]): Readonly<Record<string, string>> {
  return Object.freeze(Object.fromEntries(sidecars.map((s) => [s.name, s.url])));
}

/** The owner of a failed `unfit`: a log line (the worker goes on; its ping still says what it can). */
function unfitFailed(deps: StartSidecarsDeps, err: unknown): void {
  deps.log.error({ err }, "marking the worker unfit for its sidecars failed");
}

/** What follows a sidecar's death while the worker runs: the jobs fail, the worker is unfit. */
function died(deps: StartSidecarsDeps, reason: string): void {
  deps.log.error({ code: "RUNLET_SIDECAR_FAILED" }, reason);
  // Unfit first: it stops the take, so no job arrives after the running ones were failed.
  settle(deps.unfit(SIDECAR_CHECK, reason), (err) => unfitFailed(deps, err));
  deps.failRunningJobs(reason);
}

async function ownSidecars(deps: StartSidecarsDeps): Promise<RunningSidecars | undefined> {
  // Loaded only for a handler with sidecars: the worker's own start does not pay for child_process.
  const { SidecarProcess } = await import("./sidecar-process.js");
  const procs: SidecarProcess[] = [];
  const baseEnv = sidecarEnv(deps.baseEnv, deps.env);
  try {
    for (const settings of deps.sidecars) {
      procs.push(new SidecarProcess({ settings, log: deps.log, clock: deps.clock, baseEnv }));
    }
    await Promise.all(procs.map((p) => p.waitReady(deps.closing)));
  } catch (err) {
    await Promise.all(procs.map((p) => p.stop()));
    if (deps.closing.aborted) return undefined;
    const reason = (err as Error)?.message ?? String(err);
    settle(deps.unfit(SIDECAR_CHECK, reason), (unfitErr) => unfitFailed(deps, unfitErr));
    return undefined;
  }
  for (const p of procs) {
    settle(
      p.exited.then((exit) => {
        if (!p.stopping) died(deps, p.reasonFor(exit, " while the worker ran"));
      }),
      (err) => deps.log.error({ err, sidecar: p.settings.name }, "following the sidecar's exit failed"),
    );
  }
  let closing: Promise<void> | undefined;
  return {
    urls: urlsOf(deps.sidecars),
    close() {
      closing ??= Promise.all(procs.map((p) => p.stop())).then(() => undefined);
      return closing;
    },
  };
}

/** Under `runlet dev`: asks the parent for the sidecars, which it keeps across worker restarts. */
async function viaDevParent(deps: StartSidecarsDeps): Promise<RunningSidecars | undefined> {
  const send = process.send?.bind(process);
  if (send === undefined) return undefined;
  let onMessage: ((message: unknown) => void) | undefined;
  const answer = await new Promise<DevSidecarMessage | "closed">((resolve) => {
    const stopWaiting = onAbort(deps.closing, () => resolve("closed"));
    onMessage = (message) => {
      if (!isDevSidecarMessage(message)) return;
      if (message.runlet === "sidecars.exited") {
        died(deps, message.reason);
        return;
      }
      stopWaiting();
      resolve(message);
    };
    process.on("message", onMessage);
    send({ runlet: "sidecars.ensure", sidecars: deps.sidecars } satisfies DevSidecarMessage);
  });
  const release = () => {
    if (onMessage !== undefined) process.off("message", onMessage);
    // The channel must not keep a stopped worker alive.
    (process.channel as { unref?: () => void } | undefined)?.unref?.();
  };
  if (answer === "closed") {
    release();
    return undefined;
  }
  if (answer.runlet !== "sidecars.ready") {
    release();
    settle(
      deps.unfit(
        SIDECAR_CHECK,
        answer.runlet === "sidecars.failed" ? answer.reason : "runlet dev refused the sidecars",
      ),
      (err) => unfitFailed(deps, err),
    );
    return undefined;
  }
  return {
    urls: urlsOf(deps.sidecars),
    // runlet dev keeps them running for the next worker; this one only stops listening.
    close() {
      release();
      return Promise.resolve();
    },
  };
}
