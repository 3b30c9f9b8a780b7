import { getGlobalDispatcher } from "undici";
import { z } from "zod";
import { RunletError } from "../errors.js";
import { type Answer, HttpTransport } from "../http/transport.js";
import { dispatcherClient } from "../http/undici-client.js";
import { apiErrorSchema } from "../protocol/index.js";
import { nextRetry, type Retryable } from "../retry-policy.js";
import { sendWithRetry } from "../send-with-retry.js";
import type { ResolvedClientOptions } from "./options.js";

/** One job-API call, described once and sent (and perhaps retried) by the transport. */
export interface ApiCall<T> {
  readonly method: "GET" | "POST";
  /** Path under `/v2`, starting with the endpoint id: `ep/status/<id>` (segments already encoded). */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  /** JSON request body (POST only). */
  readonly body?: unknown;
  /** Schema the answer must satisfy. */
  readonly schema: z.ZodType<T>;
  /**
   * Whether the call may be sent again after a failure: `true` for reads that are safe to repeat
   * (`status`, `health`); `"when-refused"` for a `/stream` read, which consumes the chunks it
   * returns, so only a 429 (nothing served) is retried; `false` for writes.
   */
  readonly retryable: Retryable;
  readonly signal?: AbortSignal | undefined;
  /** Extra time the server may legitimately hold this request (runsync's `wait`), in ms. */
  readonly holdMs?: number;
}

/** Sends job-API calls: auth and headers, error answers to RunletErrors, retries by the client's policy. */
export interface Transport {
  send<T>(call: ApiCall<T>): Promise<T>;
}

const MAX_MESSAGE_BODY_CHARS = 300;

/**
 * Creates the transport for one client: the worker's transport (src/http/transport.ts) over the
 * client's undici dispatcher (its own, or undici's global one), so the job API client shares its
 * answer reading, its bounds and its abort path. Redirects are not followed (as before: an answer
 * to act on is the job API's own).
 */
export function createTransport(options: ResolvedClientOptions): Transport {
  const http = new HttpTransport({
    credential: `Bearer ${options.apiKey}`,
    userAgent: options.userAgent,
    client: dispatcherClient(options.dispatcher ?? getGlobalDispatcher()),
  });
  return {
    async send<T>(call: ApiCall<T>): Promise<T> {
      const url = new URL(`${options.apiRoot}/${call.path}`);
      for (const [name, value] of Object.entries(call.query ?? {})) {
        if (value !== undefined) url.searchParams.set(name, String(value));
      }
      const label = `${call.method} ${url.pathname}`;
      const timeoutMs = options.requestTimeoutMs + (call.holdMs ?? 0);
      return sendWithRetry<T>({
        signal: call.signal,
        retry: (attempt, failed) => nextRetry(options.retry, attempt, failed, { retryable: call.retryable }),
        attempt: async () => {
          let answer: Answer;
          try {
            answer = await http.request(call.method, url.href, {
              headers:
                call.body === undefined
                  ? JSON_ACCEPT
                  : { ...JSON_ACCEPT, "content-type": "application/json" },
              ...(call.body === undefined
                ? call.method === "POST"
                  ? { body: "" }
                  : {}
                : { body: JSON.stringify(call.body) }),
              ...(call.signal === undefined ? {} : { signal: call.signal }),
              // No byte for timeoutMs, waiting for the headers or within the body; no bound on the
              // body's size or its whole time (a job's output can be large; the job API bounds it).
              answerTimeoutMs: timeoutMs,
              answerBodyMs: Number.POSITIVE_INFINITY,
              maxAnswerBytes: Number.POSITIVE_INFINITY,
              redirects: "none",
              abortBody: true,
            });
          } catch (error) {
            if (call.signal?.aborted) throw error;
            return {
              failed: { error },
              otherwise: () => {
                throw error;
              },
            };
          }
          const { status, text } = answer;
          if (status >= 200 && status < 300) return { done: parseAnswer(label, status, text, call.schema) };
          return {
            failed: { status, headers: answer.headers },
            otherwise: () => {
              throw httpError(label, status, text);
            },
          };
        },
      });
    },
  };
}

const JSON_ACCEPT: Readonly<Record<string, string>> = Object.freeze({ accept: "application/json" });

/** The error for an error answer: the message from runlet's `{error, status, issues}` body when there is one. */
function httpError(label: string, status: number, text: string): RunletError {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): the raw text is the best detail there is.
  }
  const parsed = apiErrorSchema.safeParse(body);
  let reason: string;
  if (parsed.success) {
    reason = parsed.data.error + (parsed.data.issues?.length ? ` (${parsed.data.issues.join("; ")})` : "");
  } else if (
    typeof body === "object" &&
    body !== null &&
    typeof (body as { message?: unknown }).message === "string"
  ) {
    reason = (body as { message: string }).message;
  } else if (
    typeof body === "object" &&
    body !== null &&
    typeof (body as { error?: unknown }).error === "string"
  ) {
    reason = (body as { error: string }).error;
  } else {
    reason = text.trim() === "" ? "(empty body)" : text.trim().slice(0, MAX_MESSAGE_BODY_CHARS);
  }
  return new RunletError("RUNLET_CLIENT_HTTP", `${label} answered ${status}: ${reason}`, {
    details: { status, body },
  });
}

function parseAnswer<T>(label: string, status: number, text: string, schema: z.ZodType<T>): T {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (cause) {
    throw new RunletError(
      "RUNLET_CLIENT_BAD_RESPONSE",
      `${label} answered ${status} with a body that is not JSON: ${text.slice(0, MAX_MESSAGE_BODY_CHARS)}`,
      { cause, details: { status, body: text } },
    );
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    throw new RunletError(
      "RUNLET_CLIENT_BAD_RESPONSE",
      `${label} answered ${status} with an unexpected body: ${z.prettifyError(parsed.error)}`,
      { cause: parsed.error, details: { status, body } },
    );
  }
  return parsed.data;
}
