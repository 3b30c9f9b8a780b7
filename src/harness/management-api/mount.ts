import type { IncomingMessage, ServerResponse } from "node:http";
import { MAX_JSON_DEPTH } from "../json-depth.js";
import { dropBody, readJson } from "../read-json.js";
import { type ManagementAnswer, problem } from "./answers.js";
import { isManagementPath } from "./paths.js";
import type { ManagementRoutes } from "./routes.js";

/** Largest management request body read, bytes; management bodies are small JSON objects. */
export const MAX_MANAGEMENT_BODY_BYTES = 1_048_576; // 1 MiB

/**
 * Adapts the pure {@link ManagementRoutes} to a node:http handler with the shape of the harness's
 * `extraRoutes` seam: answers management paths and returns true, leaves every other path alone
 * (returns false without reading the body).
 *
 * @example
 * const management = createManagementRoutes({ apiKey });
 * await using h = await startHarness({ apiKey, extraRoutes: mountManagementRoutes(management) });
 */
export function mountManagementRoutes(
  routes: ManagementRoutes,
): (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> {
  return async (req, res, url) => {
    if (!isManagementPath(url.pathname)) return false;
    const request = {
      method: req.method ?? "GET",
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
    };
    // The key (and a retired v1 path) are answered before a byte of the body is read.
    const refused = routes.refuse(request);
    let answer: ManagementAnswer | undefined = refused;
    if (refused !== undefined) dropBody(req);
    else {
      const body = await readJson(req, {
        limitBytes: MAX_MANAGEMENT_BODY_BYTES,
        maxDepth: MAX_JSON_DEPTH,
        subject: "the body",
        kind: "text",
      });
      answer = body.ok ? routes.handle({ ...request, body: body.text }) : problem(body.status, body.message);
    }
    if (answer === undefined) return false;
    res.writeHead(answer.status, { ...answer.headers, "content-length": Buffer.byteLength(answer.body) });
    res.end(answer.body);
    return true;
  };
}
