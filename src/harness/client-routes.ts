import type { IncomingMessage, ServerResponse } from "node:http";
import type { Health } from "../protocol/api.js";
import type { KeyRing } from "./auth.js";
import { sendError } from "./http-util.js";
import type { JobStore } from "./job-store.js";
import type { ResolvedOptions } from "./options.js";
import type { RateLimiter } from "./rate-limits.js";

/** The client-facing job routes (platform-api §4.1). */
export const CLIENT_ROUTES = [] as const;
export type ClientRoute = string;

/** What the client routes need from the harness. */
export interface ClientRoutesContext {
  readonly store: JobStore;
  readonly keys: KeyRing;
  readonly limiter: RateLimiter;
  readonly options: ResolvedOptions;
  readonly health: (endpointId: string) => Health;
}

/** True when `name` is a client route. */
export function isClientRoute(_name: string | undefined): _name is ClientRoute {
  return false;
}

/** Serves one client route. */
export async function handleClientRoute(
  _ctx: ClientRoutesContext,
  _req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  _route: ClientRoute,
  _endpointId: string,
  _rest: readonly string[],
): Promise<void> {
  sendError(res, 404, `no route for ${url.pathname}`);
}
