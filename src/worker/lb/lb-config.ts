import { RunletError } from "../../errors.js";
import { describeValue } from "../../option-schema.js";
import { PLATFORM_ENV } from "../../protocol/env.js";
import { LOAD_BALANCER } from "../../protocol/limits.js";

/**
 * The load-balancing mode's environment (docs/load-balancing.md, "Choosing the mode" and "Ports
 * and health"), read once from the env the entry point passes: which mode the process serves in,
 * and, in `lb` mode, the ports and the health path. Library code never reads `process.env`.
 */

/** How a process serves its handler: the platform's queue, a load balancer's HTTP, or a harness on a Pod. */
export type ServeMode = "queue" | "lb" | "pod";

const MODES: readonly ServeMode[] = ["queue", "lb", "pod"];

/** The platform's per-request processing limit on load-balancing endpoints: 5.5 min. */
export const LB_MAX_REQUEST_MS = LOAD_BALANCER.maxRequestMs;

/** The platform's request and answer size limit on load-balancing endpoints: 30 MB. */
export const LB_MAX_BODY_BYTES = LOAD_BALANCER.maxBodyBytes;

/** The platform's port when `PORT` is not set. */
export const LB_DEFAULT_PORT = LOAD_BALANCER.defaultPort;

/** The health path when `HEALTH_CHECK_PATH` is not set. */
export const LB_DEFAULT_HEALTH_PATH = LOAD_BALANCER.healthPath;

/** The port a Pod's harness binds when `PORT` is not set. */
export const POD_DEFAULT_PORT = 8080;

/** The load-balancing server's settings. */
export interface LbSettings {
  /** `PORT`. @default 80 */
  readonly port: number;
  /** `PORT_HEALTH`. @default the same as `port` */
  readonly healthPort: number;
  /** `HEALTH_CHECK_PATH`. @default "/ping" */
  readonly healthPath: string;
  /** `RUNLET_LB_HOST`: the interface to bind. @default "0.0.0.0" (every interface, as the load balancer reaches the worker from outside) */
  readonly host: string;
}

function checkMode(value: string, where: string): ServeMode {
  const mode = value.trim().toLowerCase();
  if ((MODES as readonly string[]).includes(mode)) return mode as ServeMode;
  throw new RunletError(
    "RUNLET_CONFIG_INVALID",
    `${where} must be one of ${MODES.join(", ")}, got ${describeValue(value)}`,
  );
}

const isSet = (value: string | undefined): value is string => value !== undefined && value.trim() !== "";

/**
 * The mode a process serves in; undefined in local mode (nothing says how: the caller prints how
 * to run locally). The first that is set decides: `cliMode` (`--mode`), `RUNLET_MODE`,
 * `MODE_TO_RUN=pod`, then the platform's env (`RUNPOD_WEBHOOK_GET_JOB` → queue, else `PORT` → lb).
 *
 * @throws RunletError `RUNLET_CONFIG_INVALID` for a mode that is not queue, lb or pod.
 */
export function chooseServeMode(
  env: Readonly<Record<string, string | undefined>>,
  cliMode?: string,
): ServeMode | undefined {
  if (cliMode !== undefined) return checkMode(cliMode, "--mode");
  const explicit = env["RUNLET_MODE"];
  if (isSet(explicit)) return checkMode(explicit, "RUNLET_MODE");
  // The platform's Pod-first convention: MODE_TO_RUN=pod; its other value (serverless) decides nothing.
  if (env["MODE_TO_RUN"]?.trim().toLowerCase() === "pod") return "pod";
  if (isSet(env[PLATFORM_ENV.jobTakeUrl])) return "queue";
  if (isSet(env["PORT"])) return "lb";
  return undefined;
}

function readPort(env: Readonly<Record<string, string | undefined>>, name: string, fallback: number): number {
  const raw = env[name];
  if (!isSet(raw)) return fallback;
  const port = Number(raw.trim());
  if (!Number.isSafeInteger(port) || port < 0 || port > 65_535) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `${name} must be a port number from 0 to 65535, got ${describeValue(raw)}`,
    );
  }
  return port;
}

/**
 * The load-balancing server's settings from `env`; `defaultPort` when `PORT` is not set.
 *
 * @throws RunletError `RUNLET_CONFIG_INVALID` naming a bad port, path or host.
 */
export function readLbSettings(
  env: Readonly<Record<string, string | undefined>>,
  defaultPort: number = LB_DEFAULT_PORT,
): LbSettings {
  const port = readPort(env, "PORT", defaultPort);
  const healthPort = readPort(env, "PORT_HEALTH", port);
  const rawPath = env["HEALTH_CHECK_PATH"];
  const healthPath = isSet(rawPath) ? rawPath.trim() : LB_DEFAULT_HEALTH_PATH;
  if (!healthPath.startsWith("/") || healthPath.length > 256 || /[\s?#]/.test(healthPath)) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `HEALTH_CHECK_PATH must be a path starting with / (at most 256 characters, no spaces, ? or #), got ${describeValue(rawPath)}`,
    );
  }
  const rawHost = env["RUNLET_LB_HOST"];
  const host = isSet(rawHost) ? rawHost.trim() : "0.0.0.0";
  return Object.freeze({ port, healthPort, healthPath, host });
}
