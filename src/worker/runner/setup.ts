import type { Logger } from "pino";
import type { Clock, ClockTimer } from "../../clock.js";
import { RunletError } from "../../errors.js";
import type { HandlerDefinition, SetupContext } from "../../handler/define-handler.js";
import { onAbort } from "../../linked-signal.js";
import { sidecarContextOf } from "../../sidecar/options.js";

/**
 * A handler's `setup` (docs/handler.md, "Loading a model: setup and teardown"), run once where the
 * handler runs: by the in-process runner on the main thread, or by each isolation thread
 * (thread-entry.ts) before it serves a job. Bounded by `setupTimeoutMs`; its throw or timeout is
 * a reason the worker reports as unfit with `check=setup` (docs/protocol.md, "Unfit workers").
 * Also `teardown`, bounded by what is left of the shutdown grace.
 */

/** The check name of the unhealthy ping when setup fails. */
export const SETUP_CHECK = "setup";

/** How a setup ended: its state, or the one-line reason it failed. */
export type SetupOutcome =
  | { readonly ok: true; readonly state: unknown }
  | { readonly ok: false; readonly reason: string };

/** What {@link runSetup} needs besides the definition. */
export interface RunSetupOptions {
  readonly log: Logger;
  /** Times `setupTimeoutMs`: the worker's clock on the main thread, realClock() in a thread. */
  readonly clock: Clock;
  /** Aborts setup's signal (the worker closing); the outcome is then a failure naming it. */
  readonly closing?: AbortSignal | undefined;
  /** Where setup's `progress(text)` goes. */
  readonly progress: (text: string) => void;
}

/** Longest progress line kept, characters: a progress text is a status, not a payload. */
export const MAX_PROGRESS_CHARS = 200;

const TIMED_OUT: unique symbol = Symbol("timed out");
const CLOSED: unique symbol = Symbol("closed");

/** One line of an error: its name and message, no stack (the user's module, not runlet's frames). */
export function oneLine(err: unknown): string {
  if (err instanceof Error) return `${err.name || "Error"}: ${err.message}`;
  return String(err);
}

/**
 * Runs `definition.setup` once; resolves with its state (undefined without a setup) or why it
 * failed. Never rejects.
 */
export async function runSetup(
  definition: HandlerDefinition,
  options: RunSetupOptions,
): Promise<SetupOutcome> {
  const setup = definition.setup;
  if (setup === undefined) return { ok: true, state: undefined };
  const timeoutMs = definition.setupTimeoutMs;
  const own = new AbortController();
  const { log, clock, closing } = options;
  let timer: ClockTimer | undefined;
  let unsubscribe: (() => void) | undefined;
  const progress = (text: string): void => {
    if (own.signal.aborted) return;
    const line = String(text).slice(0, MAX_PROGRESS_CHARS);
    options.progress(line);
  };
  // The sidecars started (and answered) before setup: their URLs, as the handler's ctx has them.
  const sidecars = sidecarContextOf(definition.sidecars);
  const context: SetupContext = {
    log,
    signal: own.signal,
    progress,
    get sidecar() {
      return sidecars.sidecar;
    },
    sidecars: sidecars.sidecars,
  };
  try {
    const outcome = await Promise.race([
      // Called inside then(): a setup that throws synchronously is a rejection like any other.
      Promise.resolve().then(() => setup(context)),
      new Promise<typeof TIMED_OUT>((resolve) => {
        timer = clock.setTimeout(() => resolve(TIMED_OUT), timeoutMs);
      }),
      ...(closing === undefined
        ? []
        : [
            new Promise<typeof CLOSED>((resolve) => {
              unsubscribe = onAbort(closing, () => resolve(CLOSED));
            }),
          ]),
    ]);
    if (outcome === TIMED_OUT) {
      const reason = `setup did not finish within ${timeoutMs} ms (setupTimeoutMs)`;
      own.abort(new RunletError("RUNLET_WORKER_UNFIT", reason));
      return { ok: false, reason };
    }
    if (outcome === CLOSED) {
      own.abort(closing?.reason);
      return { ok: false, reason: "the worker closed while setup ran" };
    }
    return { ok: true, state: outcome };
  } catch (err) {
    return { ok: false, reason: `setup failed: ${oneLine(err)}` };
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
    unsubscribe?.();
  }
}

/**
 * Runs `definition.teardown(state)` once, for at most `withinMs` (what is left of the shutdown
 * grace); a throw or overrun is logged, never thrown: shutdown goes on.
 */
export async function runTeardown(
  definition: HandlerDefinition,
  state: unknown,
  withinMs: number,
  log: Logger,
  clock: Clock,
): Promise<void> {
  const teardown = definition.teardown;
  if (teardown === undefined) return;
  let timer: ClockTimer | undefined;
  try {
    const outcome = await Promise.race([
      Promise.resolve().then(() => teardown(state)),
      new Promise<typeof TIMED_OUT>((resolve) => {
        timer = clock.setTimeout(() => resolve(TIMED_OUT), Math.max(0, withinMs));
      }),
    ]);
    if (outcome === TIMED_OUT) {
      log.warn(
        { withinMs },
        "teardown did not finish within the shutdown grace; the worker stops without it",
      );
    } else log.debug("teardown done");
  } catch (err) {
    log.warn({ err }, "teardown failed; the worker stops anyway");
  } finally {
    if (timer !== undefined) clock.clearTimeout(timer);
  }
}
