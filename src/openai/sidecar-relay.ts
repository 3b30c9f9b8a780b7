import { JobError, RunletError } from "../errors.js";
import type { HandlerContext } from "../handler/define-handler.js";
import { HttpTransport, type Opened } from "../http/transport.js";
import { onAbort } from "../linked-signal.js";
import { USER_AGENT } from "../version.js";
import { openAIJobError } from "./errors.js";
import { SseEventSplitter } from "./sse-events.js";

/** The context a relayed request runs with (the OpenAI handler's, whatever its state). */
type OpenAIContext<State> = HandlerContext<unknown, State>;

/**
 * `defineOpenAIHandler({ relay })`: OpenAI requests passed to an OpenAI-compatible sidecar
 * (llama.cpp's server, vLLM, Ollama) and its answer passed back — its server-sent events
 * streamed through as they come, one stream item per event (docs/models.md, "Relaying OpenAI
 * requests to a sidecar"). The upstream request carries the job's signal: a job-stop, the
 * deadline, the worker's shutdown and (through the platform's cancel) a client that hangs up
 * all close it, so the server stops generating.
 */

/** Options of the relay form (`relay: true` takes every default). */
export interface OpenAIRelayOptions {
  /** The sidecar to relay to, by name. @default the handler's first (or only) sidecar */
  readonly sidecar?: string;
  /** The path of the OpenAI API on the sidecar. @default "/v1" */
  readonly basePath?: string;
  /** The model name sent upstream for each model id the endpoint serves, where they differ. @default the same name */
  readonly upstreamModels?: Readonly<Record<string, string>>;
}

/** The checked relay settings. */
export interface RelaySettings {
  readonly sidecar: string | undefined;
  readonly basePath: string;
  readonly upstreamModels: Readonly<Record<string, string>>;
}

/** Largest answer that does not stream, and largest single event of one that does, in bytes. */
export const MAX_RELAY_BODY_BYTES = 16_777_216; // 16 MiB
/** Characters of an upstream error body quoted in a job's error. */
const ERROR_QUOTE_CHARS = 1_000;

/** The relay option checked (`where` starts each message), or undefined when not given. */
export function checkRelay(value: unknown, where: string): RelaySettings | undefined {
  if (value === undefined || value === false) return undefined;
  const o = (value === true ? {} : value) as Partial<Record<keyof OpenAIRelayOptions, unknown>>;
  if (typeof o !== "object" || o === null) {
    throw new RunletError(
      "RUNLET_HANDLER_INVALID",
      `${where}: relay must be true or { sidecar?, basePath?, upstreamModels? }`,
    );
  }
  const bad = (message: string) => new RunletError("RUNLET_HANDLER_INVALID", `${where}: relay.${message}`);
  if (o.sidecar !== undefined && typeof o.sidecar !== "string") throw bad("sidecar must be a sidecar's name");
  const basePath = o.basePath ?? "/v1";
  if (typeof basePath !== "string" || (basePath !== "" && !basePath.startsWith("/"))) {
    throw bad(`basePath must be a path starting with /, got ${JSON.stringify(basePath)}`);
  }
  const models = o.upstreamModels ?? {};
  if (
    typeof models !== "object" ||
    models === null ||
    Object.values(models).some((m) => typeof m !== "string")
  ) {
    throw bad("upstreamModels must map model ids to upstream model names (strings)");
  }
  return Object.freeze({
    sidecar: o.sidecar as string | undefined,
    basePath: basePath.replace(/\/+$/, ""),
    upstreamModels: Object.freeze({ ...(models as Record<string, string>) }),
  });
}

/**
 * Sends one OpenAI request (`route` is `/v1/chat/completions` or `/v1/completions`, `body` already
 * checked) to the sidecar. Streaming requests give back the upstream events, each a string
 * `data: ...\n\n` (what the platform writes to the client as it is); others give back the response.
 */
export function relayToSidecar(
  settings: RelaySettings,
  route: string,
  body: Record<string, unknown>,
  context: OpenAIContext<unknown>,
): AsyncGenerator<string> | Promise<unknown> {
  // A streaming request is answered by a generator (so the worker streams it), which sends the
  // request on its first step: an upstream error then fails the job before anything is streamed.
  if (body["stream"] === true) {
    return (async function* () {
      const call = await send(settings, route, body, context);
      await expectEventStream(call);
      yield* relayEvents(call);
    })();
  }
  return (async () => {
    const call = await send(settings, route, body, context);
    try {
      const text = await readBounded(call.response, MAX_RELAY_BODY_BYTES);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new JobError(
          `sidecar "${call.name}" answered 2xx with a body that is not JSON: ${text.slice(0, ERROR_QUOTE_CHARS)}`,
        );
      }
    } finally {
      call.unlink();
    }
  })();
}

/** An upstream request that answered 2xx. */
interface UpstreamCall {
  readonly name: string;
  readonly response: Opened;
  readonly upstream: AbortController;
  readonly unlink: () => void;
}

/**
 * The relay's HTTP: the worker's one transport (src/http/transport.ts), node:http with keep-alive
 * to the sidecar on loopback, made on first use. Redirects are never followed (a 307 or 308 would
 * send the prompt again, to wherever the server points).
 */
let relayHttp: HttpTransport | undefined;

function header(response: Opened, name: string): string | undefined {
  const value = response.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Drops an answer's body unread. */
function discard(response: Opened): void {
  response.body.on("error", () => undefined);
  response.body.destroy();
}

/** Sends the request; an error answer or an unreachable sidecar fails the job. */
async function send(
  settings: RelaySettings,
  route: string,
  body: Record<string, unknown>,
  context: OpenAIContext<unknown>,
): Promise<UpstreamCall> {
  const target = settings.sidecar === undefined ? context.sidecar : context.sidecars[settings.sidecar];
  if (target === undefined) {
    throw new RunletError(
      "RUNLET_HANDLER_INVALID",
      `defineOpenAIHandler: relay.sidecar names "${settings.sidecar}", but the handler has no sidecar of that name`,
    );
  }
  const url = `${target.url}${settings.basePath}${route.slice("/v1".length)}`;
  const model = typeof body["model"] === "string" ? body["model"] : "";
  const upstreamModel = settings.upstreamModels[model] ?? model;
  // Our own controller, tied to the job's signal: a consumer that stops reading (the generator's
  // return) also closes the upstream request.
  const upstream = new AbortController();
  const unlink = onAbort(context.signal, () => upstream.abort(context.signal.reason));
  let response: Opened;
  try {
    relayHttp ??= new HttpTransport({ userAgent: USER_AGENT });
    response = await relayHttp.open(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ ...body, model: upstreamModel }),
      signal: upstream.signal,
      redirects: "none",
    });
  } catch (err) {
    unlink();
    context.signal.throwIfAborted();
    throw new JobError(`sidecar "${target.name}" could not be reached at ${url}: ${causeText(err)}`, {
      cause: err,
    });
  }
  if (response.status >= 300 && response.status < 400) {
    unlink();
    discard(response);
    const location = header(response, "location");
    throw openAIJobError(
      `sidecar "${target.name}" answered ${response.status} (a redirect${location === undefined ? "" : ` to ${location.slice(0, 200)}`}); the relay does not follow redirects, so the request was not sent again`,
      "server_error",
      { code: "upstream_redirect" },
    );
  }
  if (response.status < 200 || response.status > 299) {
    try {
      throw upstreamError(target.name, response.status, await readBounded(response, MAX_RELAY_BODY_BYTES));
    } finally {
      unlink();
    }
  }
  return { name: target.name, response, upstream, unlink };
}

/**
 * Fails the job, before anything is streamed, when a streaming request's answer is not
 * `text/event-stream`: a JSON body or an HTML page passed on as one stream item would reach the
 * client as a broken event.
 */
async function expectEventStream({ response, unlink, name }: UpstreamCall): Promise<void> {
  const type = header(response, "content-type");
  const media = type?.split(";")[0]?.trim().toLowerCase();
  if (media === "text/event-stream") return;
  unlink();
  discard(response);
  throw openAIJobError(
    `sidecar "${name}" answered a streaming request with ${type === undefined ? "no content-type" : `content-type ${JSON.stringify(type.slice(0, 200))}`}, not text/event-stream; the relay does not pass it on as a stream`,
    "server_error",
    { code: "upstream_not_event_stream" },
  );
}

/** The upstream events, one string each; closing the generator (or the job's signal) closes the request. */
async function* relayEvents({ response, upstream, unlink, name }: UpstreamCall): AsyncGenerator<string> {
  const splitter = new SseEventSplitter();
  let done = false;
  try {
    for await (const chunk of response.body) {
      yield* splitter.push(chunk as Buffer);
      if (splitter.pendingBytes > MAX_RELAY_BODY_BYTES) {
        throw new JobError(
          `sidecar "${name}" sent an event over ${MAX_RELAY_BODY_BYTES} bytes without its blank line; the stream was closed`,
        );
      }
    }
    done = true;
    const last = splitter.end();
    if (last !== undefined) yield last;
  } finally {
    unlink();
    // Ended early (job-stop, deadline, a client that hung up, a consumer that stopped, an event
    // too long): close the upstream request so the server stops generating.
    if (!done) {
      upstream.abort(new RunletError("RUNLET_JOB_STOPPED", "the relayed request was cancelled"));
      discard(response);
    }
  }
}

/** The job's error for an upstream error answer: its own OpenAI error when it sent one. */
function upstreamError(name: string, status: number, text: string): JobError {
  let parsed: { error?: { message?: unknown; type?: unknown; code?: unknown; param?: unknown } } | undefined;
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    // Not JSON: quoted below.
  }
  const e = parsed?.error;
  if (e !== undefined && typeof e.message === "string") {
    const type =
      typeof e.type === "string"
        ? e.type
        : status === 404
          ? "not_found_error"
          : status < 500
            ? "invalid_request_error"
            : "server_error";
    return openAIJobError(e.message, type, {
      code: typeof e.code === "string" ? e.code : null,
      param: typeof e.param === "string" ? e.param : null,
    });
  }
  const type = status === 404 ? "not_found_error" : status < 500 ? "invalid_request_error" : "server_error";
  return openAIJobError(`sidecar "${name}" answered ${status}: ${text.slice(0, ERROR_QUOTE_CHARS)}`, type);
}

/** The body as text; fails the job past `limit` bytes. */
async function readBounded(response: Opened, limit: number): Promise<string> {
  const parts: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of response.body) {
    bytes += (chunk as Buffer).byteLength;
    if (bytes > limit) {
      discard(response);
      throw new JobError(`the sidecar's answer is over ${limit} bytes; the relay stopped reading it`);
    }
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts).toString("utf8");
}

function causeText(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } })?.cause;
  if (typeof cause?.code === "string") return cause.code;
  return (err as Error)?.message ?? String(err);
}
