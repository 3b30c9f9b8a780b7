/**
 * The rules every request runlet's worker sends follows, whatever sends it (transport.ts): which
 * redirects are followed, where the credential may go, and the bounds on an answer. One place, so
 * the platform posts, the pings of the heartbeat thread, job-take and the downloads cannot drift
 * apart again (issue 43: the pings kept `Authorization` for any port of the same host name).
 */

/**
 * Most redirects one request follows, the figure of the Python SDK's HTTP client (aiohttp's
 * `max_redirects`); past it the request fails (`RUNLET_REQUEST_REDIRECTS` for the platform's).
 */
export const MAX_REDIRECTS = 10;

/**
 * The statuses followed when they carry a `Location`. Every hop keeps the method and the body:
 * for 301, 302 and 303 a browser turns a POST into a GET without its body, which would drop a
 * job's result (docs/reliability.md, "Answers, redirects and a take cut by close() (issue 32)").
 */
export const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/** The default bound on an answer's body read whole, bytes: the platform's answers are a few bytes. */
export const DEFAULT_MAX_ANSWER_BYTES = 1_048_576; // 1 MiB
/** The default bound on the time an answer's body read whole may take once its headers came, ms. */
export const DEFAULT_ANSWER_BODY_MS = 30_000;
/**
 * How many connections one transport opens to one origin at most; more requests wait for one.
 * A take answered with thousands of jobs it did not ask for fails each of them with a post:
 * without a bound each post opened its own socket at once (EMFILE at 1 024 open files).
 */
export const MAX_CONNECTIONS = 64;
/** Longest an idle keep-alive connection stays open, ms (sooner when the server's `Keep-Alive: timeout` says so). */
export const IDLE_SOCKET_MS = 30_000;

/**
 * True when the credential (`Authorization`) may go from `from` on to `to`: the same origin
 * (scheme, host and port), or its upgrade from http to https on the default port (a load
 * balancer's redirect). Never to another host, nor another port of the same host.
 */
export function keepsCredential(from: URL, to: URL): boolean {
  if (from.hostname !== to.hostname) return false;
  if (from.protocol === to.protocol) return from.port === to.port;
  return from.protocol === "http:" && to.protocol === "https:" && to.port === "";
}

/**
 * Where a redirect answer sends the request next: its `Location` resolved against `current`, when
 * the status is one of {@link REDIRECT_STATUSES} and the target is http(s); undefined otherwise
 * (the answer is then the answer).
 */
export function redirectTarget(
  status: number,
  location: string | readonly string[] | undefined,
  current: URL,
): URL | undefined {
  if (!REDIRECT_STATUSES.has(status)) return undefined;
  const to = Array.isArray(location) ? location[0] : (location as string | undefined);
  if (to === undefined || to === "") return undefined;
  let next: URL;
  try {
    next = new URL(to, current);
  } catch {
    return undefined;
  }
  return next.protocol === "http:" || next.protocol === "https:" ? next : undefined;
}

/** The origin of a URL for messages: never its path or query, which may carry a token. */
export function shownOrigin(url: URL | string): string {
  try {
    return (typeof url === "string" ? new URL(url) : url).origin;
  } catch {
    return "an unparsable URL";
  }
}
