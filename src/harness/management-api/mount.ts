import type { IncomingMessage, ServerResponse } from "node:http";
import { problem } from "./answers.js";
import { isManagementPath } from "./paths.js";
import type { ManagementRoutes } from "./routes.js";

/** Largest management request body read, bytes; management bodies are small JSON objects. */
export const MAX_MANAGEMENT_BODY_BYTES = 1_048_576; // 1 MiB

function readLimited(req: IncomingMessage, limitBytes: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    req.on("data", (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) {
        // Keep draining so the client can read the 413, but stop buffering.
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(received > limitBytes ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

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
    const body = await readLimited(req, MAX_MANAGEMENT_BODY_BYTES);
    const answer =
      body === undefined
        ? problem(413, `the body is larger than ${MAX_MANAGEMENT_BODY_BYTES} bytes`)
        : routes.handle({
            method: req.method ?? "GET",
            path: url.pathname,
            query: url.searchParams,
            headers: req.headers,
            body,
          });
    if (answer === undefined) return false;
    res.writeHead(answer.status, { ...answer.headers, "content-length": Buffer.byteLength(answer.body) });
    res.end(answer.body);
    return true;
  };
}
