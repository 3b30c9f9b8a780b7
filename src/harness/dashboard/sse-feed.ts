import type { ServerResponse } from "node:http";

/** A client that has this much unsent feed is cut (its page reconnects and starts from a fresh snapshot). */
const MAX_BUFFERED_BYTES = 8 * 1_048_576; // 8 MiB
/** A comment line this often keeps idle connections (and proxies) from timing out, ms. */
const KEEPALIVE_MS = 15_000;

/**
 * The dashboard's server-sent-event connections. Each event goes to every open connection as
 * `event: <type>` and one `data:` line of JSON.
 */
export class SseFeed {
  readonly #clients = new Set<ServerResponse>();
  readonly #keepalive: NodeJS.Timeout;

  constructor() {
    this.#keepalive = setInterval(() => {
      for (const res of this.#clients) res.write(": keepalive\n\n");
    }, KEEPALIVE_MS);
    this.#keepalive.unref();
  }

  /** True when a page is listening (so callers can skip building events nobody reads). */
  get active(): boolean {
    return this.#clients.size > 0;
  }

  /** Opens an event stream on `res`, sends `first` (the snapshot), and keeps it until the client leaves. */
  open(res: ServerResponse, first: { readonly type: string; readonly data: unknown }): void {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
    this.#clients.add(res);
    res.once("close", () => this.#clients.delete(res));
    res.write(frame(first.type, first.data));
  }

  /** Sends one event to every open connection. */
  send(type: string, data: unknown): void {
    if (this.#clients.size === 0) return;
    const text = frame(type, data);
    for (const res of this.#clients) {
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        this.#clients.delete(res);
        res.destroy();
        continue;
      }
      res.write(text);
    }
  }

  /** Ends every connection and stops the keep-alive timer. */
  close(): void {
    clearInterval(this.#keepalive);
    for (const res of this.#clients) res.end();
    this.#clients.clear();
  }
}

function frame(type: string, data: unknown): string {
  // JSON.stringify never emits a raw newline, so one data: line carries the whole event.
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}
