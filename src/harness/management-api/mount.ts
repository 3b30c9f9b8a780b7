import type { IncomingMessage, ServerResponse } from "node:http";
import type { ManagementRoutes } from "./routes.js";

export { MAX_MANAGEMENT_BODY_BYTES } from "./routes.js";

/**
 * The management copy as a `node:http` handler with the shape of the harness's `extraRoutes`
 * seam: its declared routes served through the harness's router (key and path before a byte of
 * the body is read; the body read under 1 MiB and the nesting limit), answering management paths
 * and returning true, leaving every other path alone (false, its body unread).
 *
 * @example
 * const management = createManagementRoutes({ apiKey });
 * await using h = await startHarness({ apiKey, extraRoutes: mountManagementRoutes(management) });
 */
export function mountManagementRoutes(
  routes: ManagementRoutes,
): (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> {
  return async (req, res, url) => routes.serve(req, res, url);
}
