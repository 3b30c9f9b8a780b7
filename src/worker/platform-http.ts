import { Agent, request } from "undici";
import { USER_AGENT } from "../version.js";

/**
 * The worker's HTTP to the platform: one keep-alive undici Agent, and the headers of
 * worker-protocol §3 set per request (never on a shared session, which races under concurrency).
 */

/** One answer, body already read. */
export interface PlatformResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
}

/** Options of one request. */
export interface PlatformRequestOptions {
  /** Sets `X-Request-ID`: the request is about this job. */
  readonly jobId?: string;
  /** Cuts the request short (long polls on shutdown, posts at the flush deadline). */
  readonly signal?: AbortSignal;
}

/** Talks to the platform's worker routes. */
export class PlatformHttp {
  readonly #agent: Agent;
  readonly #apiKey: string | undefined;

  constructor(apiKey: string | undefined) {
    this.#apiKey = apiKey;
    // Long polls are bounded by the caller's signal (takeTimeoutMs), not by undici's own timers.
    this.#agent = new Agent({ keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  }

  #headers(jobId: string | undefined, json: boolean): Record<string, string> {
    const headers: Record<string, string> = { "user-agent": USER_AGENT };
    if (this.#apiKey !== undefined) headers["authorization"] = this.#apiKey;
    if (jobId !== undefined) headers["x-request-id"] = jobId;
    if (json) headers["content-type"] = "application/json";
    return headers;
  }

  /** GET `url`. Throws on network errors and aborts; any status is an answer. */
  async get(url: string, options: PlatformRequestOptions = {}): Promise<PlatformResponse> {
    const response = await request(url, {
      method: "GET",
      dispatcher: this.#agent,
      headers: this.#headers(options.jobId, false),
      signal: options.signal,
    });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers, text };
  }

  /** POST JSON text to `url`. Throws on network errors and aborts; any status is an answer. */
  async postJson(url: string, body: string, options: PlatformRequestOptions = {}): Promise<PlatformResponse> {
    const response = await request(url, {
      method: "POST",
      dispatcher: this.#agent,
      headers: this.#headers(options.jobId, true),
      body,
      signal: options.signal,
    });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers, text };
  }

  /** Closes idle connections; requests still running are destroyed. */
  async close(): Promise<void> {
    await this.#agent.destroy();
  }
}
