import type { IncomingMessage, ServerResponse } from "node:http";
import { RunletError } from "../../errors.js";

/**
 * Cross-origin answers for a web page under development (`runlet dev --cors <origin>`): the
 * platform documents no CORS on its API, so the harness gives none unless asked (docs/openai.md,
 * "Browsers (CORS)"). Asked, it answers the requests under `/v2/` (the client and OpenAI routes)
 * from an allowed `Origin` with that origin in `Access-Control-Allow-Origin`, and answers their
 * preflight (`OPTIONS` with `Access-Control-Request-Method`) itself, before the API key is
 * checked, as browsers send preflights without credentials.
 */

/** Response headers a page's script may read: the request id and the retry hints. */
const EXPOSED = "x-request-id, x-should-retry, retry-after";

/** How long a browser may keep a preflight's answer, seconds. */
const PREFLIGHT_MAX_AGE_S = "600";

/** Request headers a preflight allows when it names none: what the clients send. */
const DEFAULT_ALLOWED_HEADERS = "authorization, content-type";

/**
 * The origins option checked: `*` (any origin) or `http(s)://host[:port]` origins, each as the
 * browser's `Origin` header spells it (no path, no trailing slash).
 *
 * @throws RunletError `RUNLET_HARNESS_CONFIG` naming the first origin that is not one.
 */
export function corsOriginsOf(option: unknown): readonly string[] {
  if (option === undefined) return [];
  if (!Array.isArray(option)) {
    throw new RunletError("RUNLET_HARNESS_CONFIG", 'corsOrigins must be an array of origins (or ["*"])');
  }
  return Object.freeze(
    (option as unknown[]).map((origin) => {
      if (origin === "*") return origin;
      const parsed = typeof origin === "string" ? parseOrigin(origin) : undefined;
      if (parsed === undefined || parsed !== origin) {
        throw new RunletError(
          "RUNLET_HARNESS_CONFIG",
          `corsOrigins must hold origins such as "http://localhost:5173" (scheme, host and port only) or "*", got ${JSON.stringify(origin)}`,
        );
      }
      return origin;
    }),
  );
}

function parseOrigin(text: string): string | undefined {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The router's first step when origins are allowed: sets the CORS headers on a `/v2/` request
 * from an allowed origin (the route's answer carries them) and answers its preflight with 204.
 * Claims nothing else; with no origins it is not a step at all.
 */
export function corsStep(
  origins: readonly string[],
): ((req: IncomingMessage, res: ServerResponse, url: URL) => boolean) | undefined {
  if (origins.length === 0) return undefined;
  const any = origins.includes("*");
  const allowed = new Set(origins);
  return (req: IncomingMessage, res: ServerResponse, url: URL): boolean => {
    const origin = req.headers.origin;
    if (origin === undefined || !url.pathname.startsWith("/v2/")) return false;
    if (!any && !allowed.has(origin)) return false;
    res.setHeader("access-control-allow-origin", origin);
    res.setHeader("vary", "Origin");
    const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
    if (!preflight) {
      res.setHeader("access-control-expose-headers", EXPOSED);
      return false;
    }
    const asked = req.headers["access-control-request-headers"];
    res.writeHead(204, {
      "access-control-allow-methods": "GET, POST, OPTIONS",
      // The headers the page asked for (the openai client adds its x-stainless-* ones).
      "access-control-allow-headers":
        typeof asked === "string" && asked !== "" ? asked : DEFAULT_ALLOWED_HEADERS,
      "access-control-max-age": PREFLIGHT_MAX_AGE_S,
    });
    res.end();
    req.resume();
    return true;
  };
}
