import { RunletError } from "../errors.js";
import { SseEventSplitter } from "../openai/sse-events.js";
import { checkDuration, describeValue } from "../option-schema.js";
import { retryAfterMs, sleep } from "../wait.js";

/**
 * A client of a load-balancing endpoint (docs/load-balancing.md, "Clients"): requests go to
 * `https://<endpoint id>.api.runpod.ai/<path>` (or the harness's `/lb/<id>` locally) with the API
 * key; "no workers available" answers are retried with back-off, as the platform's docs advise;
 * a session keeps the `X-Runpod-Worker-Id` of its first answer and sends it back for affinity.
 */

/** Options of {@link createLoadBalancerClient}. */
export interface LoadBalancerClientOptions {
  /** The API key, sent as `Authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** The endpoint's id: the base URL is then `https://<endpointId>.api.runpod.ai`. */
  readonly endpointId?: string;
  /** The base URL instead (the harness's `<harness url>/lb/<id>`, a worker's own URL). @default from endpointId */
  readonly baseUrl?: string;
  /** How many times a "no workers available" answer is retried. @default 3 */
  readonly maxRetries?: number;
  /** The first retry's wait, doubled each time (a Retry-After header wins), in ms. @default 1_000 */
  readonly retryBaseMs?: number;
  /** The longest wait between retries, in ms. @default 10_000 */
  readonly retryCapMs?: number;
}

/** Options of one call. */
export interface LbCallOptions {
  readonly signal?: AbortSignal;
  /** More request headers. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** What `/runsync` answers (docs/load-balancing.md, "`POST /run` and `POST /runsync`"). */
export interface LbRunResult<Output = unknown> {
  readonly id: string;
  readonly status: "COMPLETED";
  readonly output: Output;
  readonly executionTime: number;
  /** The worker that served it (`X-Runpod-Worker-Id`), when the answer named one. */
  readonly workerId: string | undefined;
}

/** How a session pins its worker: `soft` prefers it, `strict` waits for it, `strict-resume` also resumes it. */
export type LbAffinity = "soft" | "strict" | "strict-resume";

/** The calls of a load-balancing client (the client itself, or one of its sessions). */
export interface LoadBalancerCalls {
  /** Any request to `path` (a JSON `body` when given); "no workers available" is retried. */
  request(path: string, init?: LbCallOptions & { method?: string; body?: unknown }): Promise<Response>;
  /** `POST /runsync` with `{input}`; a failed request throws `RUNLET_CLIENT_HTTP` with its error. */
  runsync<Output = unknown>(input: unknown, options?: LbCallOptions): Promise<LbRunResult<Output>>;
  /**
   * `POST /stream` with `{input}`: the items the handler yields, as they come. An `error` event
   * throws `RUNLET_CLIENT_JOB_FAILED`; a body that ends without its `done` event (cut off) throws
   * `RUNLET_CLIENT_BAD_RESPONSE`.
   */
  stream(input: unknown, options?: LbCallOptions): AsyncGenerator<unknown>;
}

/** A session: its calls go to the worker of its first answer (docs/load-balancing.md, "Clients"). */
export interface LoadBalancerSession extends LoadBalancerCalls {
  /** The worker pinned, once an answer named one. */
  readonly workerId: string | undefined;
  /** Forgets the worker: the next call is routed normally (the worker may go idle). */
  end(): void;
}

/** A load-balancing endpoint's client. */
export interface LoadBalancerClient extends LoadBalancerCalls {
  readonly baseUrl: string;
  /** A session pinned to the worker of its first answer, `soft` by default. */
  session(options?: { readonly affinity?: LbAffinity }): LoadBalancerSession;
}

const NO_WORKERS = "no workers available";

function resolve(options: LoadBalancerClientOptions) {
  if (typeof options !== "object" || options === null) {
    throw new RunletError("RUNLET_CONFIG_INVALID", "createLoadBalancerClient: expected an options object");
  }
  if (typeof options.apiKey !== "string" || options.apiKey.trim() === "") {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `createLoadBalancerClient: apiKey must be a non-empty string, got ${describeValue(options.apiKey)}`,
    );
  }
  let baseUrl: string;
  if (options.baseUrl !== undefined) {
    try {
      baseUrl = new URL(options.baseUrl).href.replace(/\/+$/, "");
    } catch {
      throw new RunletError(
        "RUNLET_CONFIG_INVALID",
        `createLoadBalancerClient: baseUrl must be a URL, got ${describeValue(options.baseUrl)}`,
      );
    }
  } else if (typeof options.endpointId === "string" && /^[A-Za-z0-9_-]{1,64}$/.test(options.endpointId)) {
    baseUrl = `https://${options.endpointId}.api.runpod.ai`;
  } else {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `createLoadBalancerClient: give endpointId (letters, digits, - or _) or baseUrl, got endpointId ${describeValue(options.endpointId)}`,
    );
  }
  const maxRetries = options.maxRetries ?? 3;
  if (!Number.isSafeInteger(maxRetries) || maxRetries < 0) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `createLoadBalancerClient: maxRetries must be an integer ≥ 0, got ${describeValue(maxRetries)}`,
    );
  }
  return {
    baseUrl,
    apiKey: options.apiKey,
    maxRetries,
    retryBaseMs: checkDuration("retryBaseMs", options.retryBaseMs, 1, 1_000),
    retryCapMs: checkDuration("retryCapMs", options.retryCapMs, 1, 10_000),
  };
}

type Settings = ReturnType<typeof resolve>;

/** True for the platform's (and the harness's) "no workers available" answer. */
async function noWorkers(response: Response): Promise<boolean> {
  if (response.status < 400) return false;
  const text = await response
    .clone()
    .text()
    .catch(() => "");
  return text.toLowerCase().includes(NO_WORKERS);
}

async function httpError(response: Response, what: string): Promise<RunletError> {
  const text = await response.text().catch(() => "");
  let message = text.slice(0, 500);
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (typeof parsed.error === "string") message = parsed.error;
  } catch {
    // Not JSON: the text itself says what went wrong.
  }
  return new RunletError("RUNLET_CLIENT_HTTP", `${what} answered ${response.status}: ${message}`, {
    details: { status: response.status },
  });
}

/** The calls, sending `affinityHeader()` when it names a worker and telling `seen` each answer's worker. */
function calls(
  settings: Settings,
  affinityHeader: () => string | undefined,
  seen: (workerId: string | undefined) => void,
): LoadBalancerCalls {
  const request: LoadBalancerCalls["request"] = async (path, init = {}) => {
    const url = `${settings.baseUrl}${path.startsWith("/") ? path : `/${path}`}`;
    const body = init.body === undefined ? undefined : JSON.stringify(init.body);
    for (let attempt = 0; ; attempt += 1) {
      const affinity = affinityHeader();
      const response = await fetch(url, {
        method: init.method ?? (body === undefined ? "GET" : "POST"),
        headers: {
          authorization: `Bearer ${settings.apiKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...(affinity === undefined ? {} : { "x-runpod-worker-id": affinity }),
          ...init.headers,
        },
        ...(body === undefined ? {} : { body }),
        ...(init.signal === undefined ? {} : { signal: init.signal }),
      });
      if (attempt < settings.maxRetries && (await noWorkers(response))) {
        await response.body?.cancel();
        const backOff = Math.min(settings.retryCapMs, settings.retryBaseMs * 2 ** attempt);
        const wait = retryAfterMs(response.headers.get("retry-after") ?? undefined, {
          capMs: settings.retryCapMs,
        });
        if (!(await sleep(wait ?? backOff, init.signal))) throw init.signal?.reason ?? new Error("aborted");
        continue;
      }
      seen(response.headers.get("x-runpod-worker-id") ?? undefined);
      return response;
    }
  };
  return {
    request,
    async runsync<Output>(input: unknown, options: LbCallOptions = {}) {
      const response = await request("/runsync", { ...options, body: { input } });
      if (!response.ok) throw await httpError(response, "POST /runsync");
      const body = (await response.json()) as Omit<LbRunResult<Output>, "workerId">;
      return { ...body, workerId: response.headers.get("x-runpod-worker-id") ?? undefined };
    },
    async *stream(input: unknown, options: LbCallOptions = {}) {
      const response = await request("/stream", {
        ...options,
        body: { input },
        headers: { accept: "text/event-stream", ...options.headers },
      });
      if (!response.ok || response.body === null) throw await httpError(response, "POST /stream");
      const splitter = new SseEventSplitter();
      for await (const bytes of response.body) {
        for (const event of splitter.push(bytes)) {
          const name = /^event: ?(.*)$/m.exec(event)?.[1]?.trim() ?? "message";
          const data = [...event.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join("\n");
          if (name === "done") return;
          const value: unknown = JSON.parse(data);
          if (name === "error") {
            const error = (value as { error?: unknown }).error;
            throw new RunletError("RUNLET_CLIENT_JOB_FAILED", `the stream failed: ${String(error)}`, {
              details: { event: value },
            });
          }
          yield value;
        }
      }
      // The body ended without its done event: the stream was cut off, not complete.
      throw new RunletError(
        "RUNLET_CLIENT_BAD_RESPONSE",
        "POST /stream: the event stream ended without its done event (cut off before the handler finished)",
        { details: { body: "an event stream with no done event" } },
      );
    },
  };
}

/**
 * Creates a client of a load-balancing endpoint.
 *
 * @example
 * const lb = createLoadBalancerClient({ endpointId: "abc123", apiKey: process.env.RUNPOD_API_KEY! });
 * const chat = lb.session();
 * const first = await chat.runsync({ prompt: "hello" });
 * for await (const token of chat.stream({ prompt: "and again" })) process.stdout.write(String(token));
 */
export function createLoadBalancerClient(options: LoadBalancerClientOptions): LoadBalancerClient {
  const settings = resolve(options);
  const plain = calls(
    settings,
    () => undefined,
    () => undefined,
  );
  return {
    ...plain,
    baseUrl: settings.baseUrl,
    session(sessionOptions = {}) {
      const affinity = sessionOptions.affinity ?? "soft";
      if (affinity !== "soft" && affinity !== "strict" && affinity !== "strict-resume") {
        throw new RunletError(
          "RUNLET_CONFIG_INVALID",
          `session: affinity must be soft, strict or strict-resume, got ${describeValue(affinity)}`,
        );
      }
      let workerId: string | undefined;
      const pinned = calls(
        settings,
        () =>
          workerId === undefined ? undefined : affinity === "soft" ? workerId : `${affinity} ${workerId}`,
        (id) => {
          if (id !== undefined) workerId = id;
        },
      );
      return {
        ...pinned,
        get workerId() {
          return workerId;
        },
        end() {
          workerId = undefined;
        },
      };
    },
  };
}
