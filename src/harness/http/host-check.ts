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
   * Answers 403 and returns true when `req`'s Host is not allowed (its body is dropped unread);
   * false when the request may go on.
   */
  refuse(req: IncomingMessage, res: ServerResponse, headers: Record<string, string> = {}): boolean {
    const header = req.headers.host;
    if (this.allows(header)) return false;
    dropBody(req);
    sendError(
      res,
      403,
      `Host ${JSON.stringify((header ?? "").slice(0, 200))} is not a name this server answers to (a guard ` +
        "against DNS rebinding): it answers IP addresses, localhost and the host it is bound to; allow more " +
        "names with the harness's allowedHosts option, runlet's --allowed-hosts flag or RUNLET_ALLOWED_HOSTS " +
        '(comma-separated; ".example.com" allows a domain and its subdomains; "all" turns the check off)',
      { headers },
    );
    return true;
  }
}
