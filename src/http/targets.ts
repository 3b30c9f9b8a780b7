/**
 * Where a URL's request goes, parsed once: a streaming job posts thousands of chunks to one URL,
 * and each job's URLs are new text on the one origin of the platform.
 */

/** One origin's address: what both HTTP clients need of it. */
export interface Origin {
  readonly https: boolean;
  /** `http://host:port` as `URL.origin` writes it. */
  readonly text: string;
  /** Without the brackets of an IPv6 literal. */
  readonly hostname: string;
  readonly port: number;
}

/** A URL's request: where it goes and the path (with the query) sent. */
export interface Target {
  readonly origin: Origin;
  readonly path: string;
}

/** How many parsed URLs to keep: a job's stream and done URLs, the take and stop polls. */
const CACHE_SIZE = 64;
const SLASH = 47;
/**
 * A path and query the URL parser would leave exactly as written: only characters it never
 * encodes, and no `.` segment for it to resolve. Such a path after a known origin is sent as it
 * is; anything else is parsed.
 */
const PLAIN_PATH = /^(?!.*\/\.\.?(?:[/?]|$))[A-Za-z0-9\-._~!$&()*+,;=:@/%?]*$/;

/** URL text → its target, with a bounded cache. */
export class Targets {
  readonly #targets = new Map<string, Target>();
  readonly #origins = new Map<string, Origin>();

  /**
   * Where `url` goes. A URL seen before is looked up; a new one that starts with an origin seen
   * before is split there instead of parsed. Throws a TypeError for a scheme other than http: and
   * https: (a request refused before it is sent).
   */
  of(url: string): Target {
    const known = this.#targets.get(url);
    if (known !== undefined) return known;
    for (const [text, origin] of this.#origins) {
      if (url.startsWith(text) && url.charCodeAt(text.length) === SLASH) {
        const path = url.slice(text.length);
        if (PLAIN_PATH.test(path)) return { origin, path };
      }
    }
    const parsed = new URL(url);
    const origin = this.#origins.get(parsed.origin) ?? originOf(parsed);
    const target = { origin, path: `${parsed.pathname}${parsed.search}` };
    if (this.#targets.size >= CACHE_SIZE) this.#targets.clear();
    this.#targets.set(url, target);
    if (this.#origins.size < CACHE_SIZE) this.#origins.set(parsed.origin, origin);
    return target;
  }
}

function originOf(url: URL): Origin {
  const https = url.protocol === "https:";
  if (!https && url.protocol !== "http:") {
    throw new TypeError(`only http: and https: URLs are sent, got ${url.protocol}`);
  }
  const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return { https, text: url.origin, hostname, port: url.port === "" ? (https ? 443 : 80) : Number(url.port) };
}
