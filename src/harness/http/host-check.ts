import type { IncomingMessage, ServerResponse } from "node:http";
import { isIP } from "node:net";
import { sendError } from "./http-util.js";
import { dropBody } from "./read-json.js";

/**
 * The Host header check of the harness's and the dashboard's listeners (docs/harness.md, "Host
 * names"): against DNS rebinding, where a web page's own name is pointed at 127.0.0.1 so the
 * browser lets the page read the answers, a local server answers only the names it is known by,
 * as Vite and webpack-dev-server do. Taken: any IP address (a rebinding page cannot use one: it is
 * not its own origin), `localhost` and `*.localhost`, the host the listener was bound to, and the
 * names the operator allows (`allowedHosts`; a leading dot allows a domain and its subdomains);
 * `true` turns the check off. A request without a Host header (HTTP/1.0) is taken: browsers always
 * send one.
 *
 * The request's head is checked with it, since the name it checks can come from two places: a
 * request with two Host headers is refused (400: which one names the server is ambiguous, and
 * Node keeps the first while a proxy in front may have read the last); an absolute request target
 * (`GET http://127.0.0.1:8000/v2/... HTTP/1.1`, which HTTP says names the host in place of the
 * Host header) must parse (else 400), name the same host and port as the Host header (else 400),
 * and pass the check above itself (else 403).
 */
export type AllowedHosts = true | readonly string[];

/** The host name of a Host header value: without its port, brackets, case and trailing dot. */
export function hostNameOf(header: string): string {
  let name = header.trim();
  if (name.startsWith("[")) {
    const end = name.indexOf("]");
    name = end === -1 ? name : name.slice(1, end);
  } else {
    const colon = name.lastIndexOf(":");
    if (colon !== -1 && name.indexOf(":") === colon) name = name.slice(0, colon);
  }
  return name.toLowerCase().replace(/\.$/, "");
}

/** Checks Host headers against `allowed` and the bound host. */
export class HostCheck {
  readonly #allowed: AllowedHosts;
  readonly #bound: string;

  constructor(allowed: AllowedHosts, boundHost: string) {
    this.#allowed = allowed;
    this.#bound = hostNameOf(boundHost);
  }

  /** True when a request with this Host header may be answered. */
  allows(header: string | undefined): boolean {
    if (this.#allowed === true || header === undefined) return true;
    const name = hostNameOf(header);
    if (isIP(name) !== 0) return true;
    if (name === "localhost" || name.endsWith(".localhost")) return true;
    if (name === this.#bound) return true;
    return this.#allowed.some((entry) => {
      const e = entry.toLowerCase();
      return e.startsWith(".") ? name === e.slice(1) || name.endsWith(e) : name === e;
    });
  }

  /**
   * Answers 400 or 403 and returns true when `req`'s head is refused (see the class's summary; its
   * body is dropped unread); false when the request may go on.
   */
  refuse(req: IncomingMessage, res: ServerResponse, headers: Record<string, string> = {}): boolean {
    const refusal = this.#refusalOf(req);
    if (refusal === undefined) return false;
    dropBody(req);
    sendError(res, refusal.status, refusal.message, { headers });
    return true;
  }

  #refusalOf(req: IncomingMessage): { status: 400 | 403; message: string } | undefined {
    const hosts = hostHeadersOf(req.rawHeaders);
    if (hosts.length > 1) {
      return { status: 400, message: `the request has ${hosts.length} Host headers; send exactly one` };
    }
    const header = hosts[0];
    let name = header;
    const target = req.url ?? "/";
    if (!target.startsWith("/")) {
      const absolute = absoluteTarget(target);
      if (absolute === undefined) {
        return {
          status: 400,
          message: `malformed request target ${quote(target)}: expected a path (/v2/...) or an absolute http:// URL`,
        };
      }
      if (header !== undefined && authorityOf(header, absolute.protocol) !== absolute.host) {
        return {
          status: 400,
          message: `the request target names host ${quote(absolute.host)} but the Host header says ${quote(header)}; they must agree`,
        };
      }
      name = absolute.host;
    }
    if (this.allows(name)) return undefined;
    return {
      status: 403,
      message:
        `Host ${quote(name ?? "")} is not a name this server answers to (a guard ` +
        "against DNS rebinding): it answers IP addresses, localhost and the host it is bound to; allow more " +
        "names with the harness's allowedHosts option, runlet's --allowed-hosts flag or RUNLET_ALLOWED_HOSTS " +
        '(comma-separated; ".example.com" allows a domain and its subdomains; "all" turns the check off)',
    };
  }
}

/** The values of every Host header of a request (Node's `headers.host` keeps only the first). */
function hostHeadersOf(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === "host") out.push(raw[i + 1]!);
  return out;
}

/** An absolute-form request target as a URL: http(s) only; undefined when it does not parse. */
export function absoluteTarget(target: string): URL | undefined {
  if (!/^https?:\/\//i.test(target)) return undefined;
  try {
    return new URL(target);
  } catch {
    return undefined;
  }
}

/** A Host header value as URL's `host` writes it for `protocol` (lower case, default port dropped); "" when it does not parse. */
function authorityOf(header: string, protocol: string): string {
  try {
    return new URL(`${protocol}//${header.trim()}`).host;
  } catch {
    return "";
  }
}

/** A value quoted for a message, cut to 200 characters. */
function quote(value: string): string {
  return JSON.stringify(value.slice(0, 200));
}
