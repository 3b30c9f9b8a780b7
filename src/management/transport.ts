import { type Dispatcher, getGlobalDispatcher } from "undici";
import { RunletError } from "../errors.js";
import { HttpTransport } from "../http/transport.js";
import { dispatcherClient } from "../http/undici-client.js";
import { timedOut, withLinkedSignal } from "../linked-signal.js";
import type { Logger } from "../log/index.js";
import { nextRetry, type RetryPolicy, retryPolicy } from "../retry-policy.js";
import { sendWithRetry } from "../send-with-retry.js";
import { USER_AGENT } from "../version.js";
import { managementHttpError, parseRetryAfterMs } from "./problem.js";

/** HTTP methods the management API uses. */
export type HttpMethod = "GET" | "POST" | "PATCH" | "PUT" | "DELETE";

/** Query parameters; `undefined` values are left out, arrays repeat the name. */
export type Query = Readonly<
  Record<string, string | number | boolean | readonly (string | number)[] | undefined>
>;

/** Methods retried on 429. POST is not: a create or an action must not run twice by surprise. */
export const DEFAULT_RETRY_METHODS: readonly HttpMethod[] = ["GET", "DELETE", "PATCH", "PUT"];

/** Settings of the HTTP layer, merged and frozen once by the client. */
export interface TransportSettings {
  readonly apiKey: string;
  /** Origins (plus any path prefix) under which `/v1/...` and `/v2/...` live. */
  readonly baseUrls: Readonly<{ v1: string; v2: string }>;
  readonly timeoutMs: number;
  /** Which answers are retried and how long to wait (429 only, by default). */
  readonly retry: RetryPolicy;
  readonly retryMethods: ReadonlySet<HttpMethod>;
  readonly dispatcher: Dispatcher | undefined;
  readonly logger: Logger | undefined;
  /** Source of jitter in [0, 1). */
  readonly random: () => number;
}

/** One call: which version, method, path below the version prefix, query and JSON body. */
export interface CallSpec {
  readonly version: "v1" | "v2";
  readonly method: HttpMethod;
  /** Path below `/v1` or `/v2`, starting with `/` (e.g. `/serverless/abc`). */
  readonly path: string;
  readonly query?: Query | undefined;
  readonly body?: unknown;
  readonly signal?: AbortSignal | undefined;
}

/** A request ready to send (or to print in a dry run: `headers.authorization` is redacted there). */
export interface PreparedRequest {
  readonly method: HttpMethod;
  readonly url: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
}

/** Builds the URL, headers and body text of `spec`. With `redact`, the key becomes `[redacted]`. */
export function prepareRequest(settings: TransportSettings, spec: CallSpec, redact = false): PreparedRequest {
  const path = `/${spec.version}${spec.path}`;
  const url = new URL(settings.baseUrls[spec.version] + path);
  for (const [name, value] of Object.entries(spec.query ?? {})) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) url.searchParams.append(name, String(v));
    else url.searchParams.set(name, String(value));
  }
  const headers: Record<string, string> = {
    authorization: `Bearer ${redact ? "[redacted]" : settings.apiKey}`,
    accept: "application/json",
    "user-agent": USER_AGENT,
  };
  let body: string | undefined;
  if (spec.body !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(spec.body);
  }
  return { method: spec.method, url: url.toString(), path, headers, body };
}

/**
 * The management client's retry policy: a 429 only (other answers are the caller's news), full
 * jitter, and a `Retry-After` longer than the cap fails at once rather than stall a deploy.
 */
export function managementRetryPolicy(
  limits: Pick<RetryPolicy, "maxRetries" | "baseMs" | "capMs">,
): RetryPolicy {
  return retryPolicy({
    statuses: new Set([429]),
    refusedStatuses: new Set([429]),
    allServerErrors: false,
    errorCodes: new Set(),
    jitter: 1,
    longRetryAfter: "give-up",
    maxRetryAfterMs: limits.capMs,
    ...limits,
  });
}

function parseAnswer(text: string, contentType: string | undefined): unknown {
  if (text.length === 0) return undefined;
  if (contentType !== undefined && !/json/i.test(contentType)) return text;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new RunletError("RUNLET_MANAGEMENT_BAD_RESPONSE", `the answer is not JSON: ${text.slice(0, 200)}`, {
      cause: err,
    });
  }
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Each settings object's transport: the worker's (src/http/transport.ts) over its dispatcher. */
const transports = new WeakMap<TransportSettings, HttpTransport>();

/**
 * The transport of `settings`, made once: the management client shares the worker's transport
 * (its answer reading and abort path) over its own dispatcher, or undici's global one. Headers,
 * the key among them, come from {@link prepareRequest}; redirects are not followed.
 */
function httpFor(settings: TransportSettings): HttpTransport {
  let http = transports.get(settings);
  if (http === undefined) {
    http = new HttpTransport({ client: dispatcherClient(settings.dispatcher ?? getGlobalDispatcher()) });
    transports.set(settings, http);
  }
  return http;
}

/**
 * Sends one call with bearer auth. A 429 on a retryable method is retried by `settings.retry`:
 * up to `maxRetries` times, waiting `Retry-After` when the server sent one (giving up at once if
 * that is longer than `retryCapMs`), else a jittered exponential back-off. Every wait ends on
 * `signal`.
 */
export async function send(settings: TransportSettings, spec: CallSpec): Promise<unknown> {
  const prepared = prepareRequest(settings, spec);
  const retryable = settings.retryMethods.has(spec.method);
  return sendWithRetry<unknown>({
    signal: spec.signal,
    retry: (attempt, failed) =>
      nextRetry(settings.retry, attempt, failed, { retryable, random: settings.random }),
    attempt: async (attempt) => {
      let status: number;
      let text: string;
      let headers: Record<string, string | string[] | undefined>;
      let linked: AbortSignal | undefined;
      try {
        // Linked without AbortSignal.any (a Node 20 leak) or AbortSignal.timeout (held until it
        // fires): nothing outlives the call.
        ({ status, headers, text } = await withLinkedSignal(
          spec.signal,
          settings.timeoutMs,
          async (signal) => {
            linked = signal;
            const answer = await httpFor(settings).request(spec.method, prepared.url, {
              headers: prepared.headers,
              ...(prepared.body === undefined ? {} : { body: prepared.body }),
              signal,
              // The call's own timeout (the linked signal) bounds it all, the body included.
              answerBodyMs: Number.POSITIVE_INFINITY,
              maxAnswerBytes: Number.POSITIVE_INFINITY,
              redirects: "none",
              abortBody: true,
            });
            return { status: answer.status, headers: { ...answer.headers }, text: answer.text };
          },
        ));
      } catch (err) {
        if (spec.signal?.aborted === true) throw spec.signal.reason;
        const late = linked !== undefined && timedOut(linked);
        // Not retried: a network failure is the caller's news (the policy retries a 429 only).
        throw new RunletError(
          "RUNLET_MANAGEMENT_NETWORK",
          late
            ? `${spec.method} ${prepared.path} got no answer within ${settings.timeoutMs} ms (timeoutMs)`
            : `${spec.method} ${prepared.path} failed before an answer: ${err instanceof Error ? err.message : String(err)}`,
          { cause: err, details: { method: spec.method, path: prepared.path, timedOut: late } },
        );
      }
      settings.logger?.debug(
        { method: spec.method, path: prepared.path, status, attempt },
        "management call",
      );
      if (status >= 200 && status < 300) return { done: parseAnswer(text, header(headers, "content-type")) };
      const retryAfterMs = parseRetryAfterMs(header(headers, "retry-after"), Date.now());
      const error = managementHttpError({
        method: spec.method,
        path: prepared.path,
        status,
        bodyText: text,
        retryAfterMs,
      });
      return {
        failed: { status, headers },
        otherwise: () => {
          throw error;
        },
      };
    },
    onRetry: ({ attempt, delayMs }) =>
      settings.logger?.debug(
        { method: spec.method, path: prepared.path, attempt, delayMs },
        "management call rate limited; retrying",
      ),
  });
}
