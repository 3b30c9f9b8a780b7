import { WARM_CACHE_DEFAULTS } from "../cache/cache-options.js";
import { RunletError } from "../errors.js";
import { HANDLER_DEFAULTS, type HandlerDefinition } from "../handler/define-handler.js";
import { SIDECAR_DEFAULTS } from "../sidecar/options.js";

/**
 * The start-up budget (docs/fitness.md, "The start-up budget"): the platform marks a worker
 * unhealthy when its cold start runs past 7 minutes, or past `RUNPOD_INIT_TIMEOUT` seconds where
 * the endpoint sets it. runlet's own phase timeouts (`setupTimeoutMs`, a sidecar's
 * `readyTimeoutMs`, the warm cache's `hydrateTimeoutMs`) are 10 minutes each, in sequence, so
 * without one budget over them all a slow model load is killed with no line saying why. The budget
 * counts from the process's start; a phase still running when it is nearly spent ends the start
 * unfit, with a reason naming the variable, before the platform's own limit.
 */

/** The platform's variable: the cold-start limit, seconds. */
export const INIT_TIMEOUT_ENV = "RUNPOD_INIT_TIMEOUT";

/** The platform's limit when the variable is not set, seconds (7 minutes: serverless/development/optimization). */
export const DEFAULT_INIT_TIMEOUT_S = 420;

/** The longest budget a timer can hold, seconds (2³¹−1 ms). */
const MAX_INIT_TIMEOUT_S = 2_147_483;

/** How long before the platform's limit the worker gives up, so its unhealthy ping and exit come first. */
export const BUDGET_MARGIN_MS = 15_000;

/** The start-up budget, read once into the worker's config. */
export interface StartupBudget {
  /** The platform's limit, ms. */
  readonly totalMs: number;
  /** Whether the endpoint set RUNPOD_INIT_TIMEOUT (else the platform's default applies). */
  readonly fromEnv: boolean;
  /** When start-up began, ms since the epoch (the process's start under `runlet start` and in a bundle). */
  readonly startedAt: number;
}

/**
 * Reads RUNPOD_INIT_TIMEOUT from `env` (seconds, a number above 0): the budget, counted from
 * `startedAt`. A value that is not one throws RUNLET_CONFIG_INVALID naming the variable.
 */
export function readStartupBudget(
  env: Readonly<Record<string, string | undefined>>,
  startedAt: number,
): StartupBudget {
  const text = env[INIT_TIMEOUT_ENV]?.trim() ?? "";
  if (text === "") return { totalMs: DEFAULT_INIT_TIMEOUT_S * 1_000, fromEnv: false, startedAt };
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > MAX_INIT_TIMEOUT_S) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `bad environment: ${INIT_TIMEOUT_ENV} must be the cold-start limit in seconds, a number above 0 and at most ${MAX_INIT_TIMEOUT_S}, got ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  return { totalMs: Math.round(seconds * 1_000), fromEnv: true, startedAt };
}

/** When the worker gives up on start-up, ms after `startedAt`: the margin before the limit, at most a twentieth of it. */
export function giveUpAfterMs(budget: StartupBudget): number {
  return budget.totalMs - Math.min(BUDGET_MARGIN_MS, budget.totalMs / 20);
}

/** The budget left at `now` (ms since the epoch), ms; 0 once spent. A phase takes at most this. */
export function budgetLeftMs(budget: StartupBudget, now: number = Date.now()): number {
  return Math.max(0, budget.startedAt + giveUpAfterMs(budget) - now);
}

/** The budget in words: `RUNPOD_INIT_TIMEOUT (420 s, the platform's default)`. */
export function describeBudget(budget: StartupBudget): string {
  const s = budget.totalMs / 1_000;
  return `${INIT_TIMEOUT_ENV} (${s} s${budget.fromEnv ? "" : ", the platform's default"})`;
}

/**
 * The start-up bounds a handler sets itself, in the order its phases run, and their sum (the
 * longest start they allow). A bound left at its default (10 minutes each) is not counted: the
 * budget caps it without a word, where a bound the handler chose that cannot fit is worth a line.
 */
export function configuredStartup(definition: HandlerDefinition): {
  readonly parts: string[];
  readonly totalMs: number;
} {
  const parts: string[] = [];
  let totalMs = 0;
  const hydrate = definition.warmCache?.hydrateTimeoutMs;
  if (hydrate !== undefined && hydrate !== WARM_CACHE_DEFAULTS.hydrateTimeoutMs) {
    parts.push(`hydrateTimeoutMs ${hydrate} ms`);
    totalMs += hydrate;
  }
  // Sidecars start together: the slowest one's bound counts.
  const sidecar = definition.sidecars
    .filter((s) => s.readyTimeoutMs !== SIDECAR_DEFAULTS.readyTimeoutMs)
    .reduce<{ name: string; ms: number } | undefined>(
      (max, s) =>
        max === undefined || s.readyTimeoutMs > max.ms ? { name: s.name, ms: s.readyTimeoutMs } : max,
      undefined,
    );
  if (sidecar !== undefined) {
    parts.push(`sidecar "${sidecar.name}" readyTimeoutMs ${sidecar.ms} ms`);
    totalMs += sidecar.ms;
  }
  if (definition.setup !== undefined && definition.setupTimeoutMs !== HANDLER_DEFAULTS.setupTimeoutMs) {
    parts.push(`setupTimeoutMs ${definition.setupTimeoutMs} ms`);
    totalMs += definition.setupTimeoutMs;
  }
  return { parts, totalMs };
}
