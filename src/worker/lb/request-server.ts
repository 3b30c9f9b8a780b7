import { randomUUID } from "node:crypto";
import type { MessagePort } from "node:worker_threads";
import type { Logger } from "pino";
import { RunletError } from "../../errors.js";
import type { HandlerDefinition } from "../../handler/define-handler.js";
import { redactText } from "../../log/redact-text.js";
import { type OpenAIErrorBody, statusOf } from "../../protocol/openai.js";
import { settle } from "../../task-sink.js";
import type { WorkerEventHub } from "../events.js";
import { FrontExchange } from "./front-exchange.js";
import type { FromFrontRequests } from "./front-messages.js";
import {
  consultConcurrency,
  deadlineMessage,
  type JobRun,
  type JobRunDeps,
  type RunEnding,
  startJobRun,
} from "./job-run.js";
import { LB_MAX_BODY_BYTES, LB_MAX_REQUEST_MS } from "./lb-config.js";
import { pathOf, type Route, routeFor, routesOf } from "./routes.js";

/**
 * The worker's request server in load-balancing mode (docs/load-balancing.md, "Requests"): on the
 * main thread, taking the requests the front thread parsed and posted over a MessagePort
 * (front-messages.ts) and posting their answers back. Each request is one job on the
 * worker's job path (job-run.ts) under the same limits as a queued one: the concurrency (one past
 * it is refused at once), the deadline (capped at the platform's 5.5 min), validation, the body
 * limit, a client's hang-up, and the shutdown grace.
 */

/** What the server reports to the worker. */
export interface ServerReports {
  /** A handler threw a WorkerUnfitError. */
  unfit(check: string, reason: string): void;
  /** A result asked for the worker to be replaced (`refreshWorker`). */
  refresh(requestId: string): void;
  /** An in-process handler ignored its aborted signal past the grace: the worker must be replaced. */
  runaway(requestId: string): void;
}

/** What the request server is built from. */
export interface RequestServerDeps extends JobRunDeps {
  readonly definition: HandlerDefinition;
  readonly log: Logger;
  readonly events: WorkerEventHub;
  readonly reports: ServerReports;
}

/** A request id a client may choose: 1–128 of letters, digits and `-_.:`. */
const CLIENT_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A request in flight: its run (once started) and its end. */
interface InFlight {
  readonly id: string;
  run: JobRun | undefined;
  /** Aborts its run, the hard stop armed for a run of its own (set with the run). */
  stop: ((reason: Error) => void) | undefined;
  readonly done: Promise<void>;
}

/** How the answer of one request is written: JSON at the end, or server-sent events as items come. */
type AnswerMode = { kind: "json"; items: unknown[] | undefined; bytes: number } | { kind: "sse" };

/** The request server. */
export class RequestServer {
  readonly #deps: RequestServerDeps;
  readonly #routes: ReadonlyMap<string, Route>;
  /** The requests passed on and not answered yet, by the front thread's id. */
  readonly #exchanges = new Map<number, FrontExchange>();
  readonly #inFlight = new Set<InFlight>();
  #concurrency: number;
  #stopping = false;
  /** Wakes the drain when a request ends. */
  #changed: (() => void) | undefined;

  constructor(deps: RequestServerDeps) {
    this.#deps = deps;
    this.#routes = routesOf(deps.definition);
    const concurrency = deps.definition.concurrency;
    this.#concurrency = typeof concurrency === "number" ? concurrency : 1;
  }

  /** The routes served, for the start line. */
  get routes(): readonly string[] {
    return [...this.#routes.values()].map((route) => `${route.method} ${route.path}`);
  }

  /** Takes the requests the front thread posts on `port` (its end is the front thread's `requests`). */
  attach(port: MessagePort): void {
    port.on("message", (message: FromFrontRequests) => {
      if (message.type === "request") {
        const exchange = new FrontExchange(port, message, () => this.#exchanges.delete(message.id));
        this.#exchanges.set(message.id, exchange);
        this.#serve(exchange);
      } else if (message.type === "abort") this.#exchanges.get(message.id)?.aborted();
      else this.#exchanges.get(message.id)?.acked();
    });
    // The front thread holds the process while it runs; its port does not.
    port.unref();
  }

  /**
   * Stops accepting; requests in flight get `withinMs` to finish, then are aborted (answered 503)
   * and given `hardStopGraceMs` more to settle; then every connection is closed.
   */
  async drain(withinMs: number): Promise<void> {
    this.#stopping = true;
    await this.#waitEmpty(withinMs);
    if (this.#inFlight.size > 0) {
      this.#deps.log.warn(
        { requests: this.#inFlight.size },
        "the shutdown grace ended with requests still running: aborting them",
      );
      for (const entry of this.#inFlight) {
        entry.run?.abort(new RunletError("RUNLET_JOB_SHUTDOWN", "the worker is shutting down"));
      }
      const graceMs = this.#deps.definition.hardStopGraceMs;
      await this.#waitEmpty(graceMs);
      const stops: Promise<void>[] = [];
      for (const entry of this.#inFlight) {
        const stopping = entry.run?.hardStop();
        if (stopping === undefined) continue;
        stops.push(
          stopping.then(
            (stopped) => {
              if (!stopped)
                this.#deps.log.warn(
                  { requestId: entry.id },
                  "a request's handler ignored its aborted signal",
                );
            },
            (err: unknown) =>
              this.#deps.log.warn({ err, requestId: entry.id }, "hard-stopping a request failed"),
          ),
        );
      }
      // The runs stopped by force end as "killed": their answers (a stream's error event) are
      // written before the connections close, within one more grace.
      await Promise.race([Promise.all(stops), sleepFor(graceMs)]);
      await this.#waitEmpty(graceMs);
    }
    // What is still unanswered is cut, as closing its connection cut it.
    for (const exchange of [...this.#exchanges.values()]) exchange.destroy();
  }

  async #waitEmpty(withinMs: number): Promise<void> {
    const end = Date.now() + withinMs;
    while (this.#inFlight.size > 0 && Date.now() < end) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, end - Date.now()));
        this.#changed = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.#changed = undefined;
  }

  #serve(res: FrontExchange): void {
    const started = Date.now();
    const header = res.headers["x-request-id"];
    const id = typeof header === "string" && CLIENT_ID.test(header) ? header : `lb-${randomUUID()}`;
    const path = pathOf(res.url);
    const log = this.#deps.log.child({ requestId: id });
    res.setHeader("x-request-id", id);
    res.onFinish(() => {
      log.info(
        { method: res.method, path, status: res.statusCode, ms: Date.now() - started },
        "request answered",
      );
    });
    const route = routeFor(this.#routes, path);
    if (route === undefined) {
      sendJson(res, 404, {
        error: `no route ${path}; this worker serves ${this.routes.join(", ")}`,
      });
      return;
    }
    if (res.method !== route.method && !(route.method === "GET" && res.method === "HEAD")) {
      sendJson(
        res,
        405,
        { error: `${path} takes ${route.method}, not ${res.method}` },
        { allow: route.method },
      );
      return;
    }
    if (this.#stopping) {
      sendJson(res, 503, { error: "the worker is stopping" }, { connection: "close" });
      return;
    }
    this.#concurrency = consultConcurrency(this.#deps.definition.concurrency, this.#concurrency, log);
    // The scheduler runs with it too: a batch handler's concurrency is its batches at once.
    this.#deps.scheduler.setConcurrency(this.#concurrency);
    const limit = requestLimit(this.#deps.definition, this.#concurrency);
    if (this.#inFlight.size >= limit) {
      sendJson(
        res,
        429,
        { error: `the worker is at its concurrency limit (${limit} requests at once)` },
        { "retry-after": "1" },
      );
      return;
    }
    let finish!: () => void;
    const entry: InFlight = {
      id,
      run: undefined,
      stop: undefined,
      done: new Promise<void>((resolve) => {
        finish = resolve;
      }),
    };
    this.#inFlight.add(entry);
    const release = (): void => {
      this.#inFlight.delete(entry);
      finish();
      this.#changed?.();
    };
    settle(this.#handle(res, route, entry, log).then(release), (err: unknown) => {
      log.error({ err }, "serving the request failed inside the worker");
      if (!res.headersSent)
        sendJson(res, 500, { id, status: "FAILED", error: "the worker failed while serving this request" });
      else res.destroy();
      release();
    });
  }

  async #handle(res: FrontExchange, route: Route, entry: InFlight, log: Logger): Promise<void> {
    const { definition } = this.#deps;
    const id = entry.id;
    let body: unknown;
    if (res.method === "POST") {
      const read = parseJsonBody(res.body);
      if (!read.ok) {
        sendJson(res, read.status, { error: read.error });
        return;
      }
      body = read.value;
    }
    let input: unknown;
    let policyMs: number | undefined;
    if (route.kind === "job" || route.kind === "stream") {
      if (typeof body !== "object" || body === null || Array.isArray(body) || !("input" in body)) {
        sendJson(res, 400, { error: `the body must be a JSON object with "input", got ${describe(body)}` });
        return;
      }
      input = (body as { input: unknown }).input;
      const policy = (body as { policy?: unknown }).policy;
      const ms = (policy as { executionTimeout?: unknown } | undefined)?.executionTimeout;
      if (typeof ms === "number" && Number.isSafeInteger(ms) && ms > 0) policyMs = ms;
    } else if (route.kind === "openai") {
      input = { openai_route: pathOf(res.url), ...(body === undefined ? {} : { openai_input: body }) };
    } else {
      input = body;
    }
    const timeoutMs = Math.min(policyMs ?? definition.executionTimeoutMs, LB_MAX_REQUEST_MS);
    const accept = String(res.headers["accept"] ?? "");
    const wantsStream =
      route.kind === "stream" ||
      (route.kind !== "openai" && accept.includes("text/event-stream")) ||
      (route.kind === "openai" && (body as { stream?: unknown } | undefined)?.stream === true);
    let mode: AnswerMode = { kind: "json", items: undefined, bytes: 0 };
    let answered = false;
    let timedOut = false;
    const answer = (status: number, value: unknown): void => {
      if (answered) return;
      answered = true;
      if (mode.kind === "sse") {
        res.end();
        return;
      }
      sendJson(res, status, value);
    };
    const run = startJobRun(
      this.#deps,
      { id, input, timeoutMs, log },
      {
        streaming: () => {
          if (!wantsStream) {
            mode = { kind: "json", items: [], bytes: 0 };
            return;
          }
          mode = { kind: "sse" };
          res.writeHead(200, {
            "content-type": "text/event-stream",
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
          });
        },
        item: async (value) => {
          if (answered || res.destroyed) return;
          if (mode.kind === "json") {
            const json = itemJson(value);
            mode.bytes += Buffer.byteLength(json) + 1;
            if (mode.bytes > LB_MAX_BODY_BYTES) {
              entry.stop?.(
                new RunletError(
                  "RUNLET_OUTPUT_TOO_LARGE",
                  `the items yielded add up to more than the answer limit of ${LB_MAX_BODY_BYTES} bytes (30 MB); ask with Accept: text/event-stream to stream them`,
                ),
              );
              return;
            }
            mode.items?.push(json);
            return;
          }
          const text =
            route.kind === "openai" && typeof value === "string" ? value : `data: ${itemJson(value)}\n\n`;
          if (!res.write(text)) await res.drained();
        },
      },
    );
    entry.run = run;
    let deadline: NodeJS.Timeout | undefined;
    let hardStop: NodeJS.Timeout | undefined;
    let over = false;
    // Aborts the handler's signal (the run's first abort wins). A run of its own is hard-stopped
    // after the grace if its handler ignores the signal; one that cannot be (in-process) is a
    // runaway, reported as the queue reports one. A batch is hard-stopped by its scheduler once no
    // job of it is wanted: one request's deadline never ends the others.
    const stop = (reason: Error): void => {
      if (deadline !== undefined) clearTimeout(deadline);
      deadline = undefined;
      run.abort(reason);
      if (over || hardStop !== undefined || !run.ownRun) return;
      hardStop = setTimeout(() => {
        if (over) return;
        settle(
          run.hardStop().then((stopped) => {
            if (stopped || over) return;
            log.error(
              { code: "RUNLET_JOB_TIMEOUT", hardStopGraceMs: definition.hardStopGraceMs },
              "the handler ignored its aborted signal past hardStopGraceMs and cannot be stopped in-process",
            );
            this.#deps.reports.runaway(id);
          }),
          (err: unknown) => log.warn({ err }, "hard-stopping the request failed"),
        );
      }, definition.hardStopGraceMs);
    };
    entry.stop = stop;
    // The client hung up before its answer was complete: the handler's signal aborts.
    res.onClose(() => {
      answered = true;
      stop(new RunletError("RUNLET_JOB_SHUTDOWN", "the client closed its connection"));
    });
    // A job that ends before its run starts (a batch member's bad input, a hang-up while it waits
    // for its seat) never starts: its answer is its ending.
    const startedAt = await Promise.race([run.started, run.ended.then(() => undefined)]);
    if (startedAt !== undefined && !over && !answered) {
      deadline = setTimeout(
        () => {
          deadline = undefined;
          timedOut = true;
          const message = deadlineMessage(timeoutMs);
          stop(new RunletError("RUNLET_JOB_TIMEOUT", message));
          if (mode.kind === "sse") {
            writeEvent(res, "error", { id, status: "TIMED_OUT", error: message });
            answer(504, undefined);
          } else answer(504, { id, status: "TIMED_OUT", error: message });
        },
        Math.max(0, startedAt + timeoutMs - Date.now()),
      );
    }
    // The error leaves the worker (the answer, the failed event): scrubbed as the log scrubs a line,
    // as a queued job's error is before it is reported.
    const ending = scrubbed(await run.ended, log);
    over = true;
    if (deadline !== undefined) clearTimeout(deadline);
    if (hardStop !== undefined) clearTimeout(hardStop);
    const executionTime = startedAt === undefined ? 0 : Date.now() - startedAt;
    this.#report(id, ending, executionTime);
    if (answered) return;
    this.#answer(res, route, mode, ending, { id, executionTime, timedOut }, answer);
  }

  /** The end's events (telemetry, the dashboard) and what it asks of the worker. */
  #report(id: string, ending: RunEnding, executionTimeMs: number): void {
    const { events, reports } = this.#deps;
    if (ending.kind === "killed") {
      events.emit("failed", {
        jobId: id,
        executionTimeMs,
        metrics: {},
        code: "RUNLET_JOB_TIMEOUT",
        message: "hard-stopped",
      });
      return;
    }
    if (ending.kind === "output") {
      events.emit("finished", { jobId: id, executionTimeMs, metrics: ending.metrics });
    } else {
      events.emit("failed", {
        jobId: id,
        executionTimeMs,
        metrics: ending.metrics,
        code: ending.code,
        message: ending.message,
      });
      if (ending.unfit !== undefined) reports.unfit(ending.unfit.check, ending.unfit.reason);
    }
    if (ending.stopPod) reports.refresh(id);
  }

  #answer(
    res: FrontExchange,
    route: Route,
    mode: AnswerMode,
    ending: RunEnding,
    meta: { readonly id: string; readonly executionTime: number; readonly timedOut: boolean },
    answer: (status: number, value: unknown) => void,
  ): void {
    const { id, executionTime } = meta;
    if (ending.kind === "killed") {
      // A stream cut off by force ends with an error, never like a complete one.
      const error = "the handler was stopped by force";
      if (mode.kind === "sse") {
        if (route.kind === "openai") res.write(`data: ${JSON.stringify(openAIErrorOf(error).body)}\n\n`);
        else writeEvent(res, "error", { id, status: "FAILED", error });
      }
      answer(meta.timedOut ? 504 : 503, { id, status: "FAILED", error: "the handler was stopped by force" });
      return;
    }
    if (mode.kind === "sse") {
      if (ending.kind === "output") {
        if (route.kind !== "openai") writeEvent(res, "done", { id, status: "COMPLETED", executionTime });
      } else if (route.kind === "openai") {
        res.write(`data: ${JSON.stringify(openAIErrorOf(ending.message).body)}\n\n`);
      } else {
        writeEvent(res, "error", { id, status: "FAILED", error: ending.message });
      }
      answer(200, undefined);
      return;
    }
    if (ending.kind === "output") {
      const output = mode.items === undefined ? ending.json : `[${mode.items.join(",")}]`;
      if (Buffer.byteLength(output) > LB_MAX_BODY_BYTES) {
        answer(500, {
          id,
          status: "FAILED",
          error: `the output is larger than the answer limit of ${LB_MAX_BODY_BYTES} bytes (30 MB)`,
          code: "RUNLET_OUTPUT_TOO_LARGE",
        });
        return;
      }
      if (route.kind === "openai") {
        sendText(res, 200, output);
        return;
      }
      sendText(
        res,
        200,
        `{"id":${JSON.stringify(id)},"status":"COMPLETED","output":${output},"executionTime":${executionTime}}`,
      );
      return;
    }
    if (route.kind === "openai") {
      const { status, body } = openAIErrorOf(ending.message);
      answer(status, body);
      return;
    }
    const status =
      ending.code === "RUNLET_INPUT_INVALID" ? 400 : ending.code === "RUNLET_JOB_SHUTDOWN" ? 503 : 500;
    answer(status, { id, status: "FAILED", error: ending.message });
  }
}

/**
 * How many requests may be in flight: a plain handler's concurrency; for a batch handler, whose
 * concurrency counts batches at once, that many full batches (concurrency × batch.maxSize).
 */
export function requestLimit(definition: HandlerDefinition, concurrency: number): number {
  return definition.batch === undefined ? concurrency : concurrency * definition.batch.maxSize;
}

/** `ending` with its error message scrubbed of the log's secrets (the worker's API key) and the secret patterns. */
function scrubbed(ending: RunEnding, log: Logger): RunEnding {
  if (ending.kind !== "error") return ending;
  const message = redactText(ending.message, log);
  const unfit =
    ending.unfit === undefined
      ? undefined
      : { check: ending.unfit.check, reason: redactText(ending.unfit.reason, log) };
  return { ...ending, message, unfit };
}

/** An item as JSON text: bytes as a base64 string. */
function itemJson(value: unknown): string {
  if (value instanceof Uint8Array) {
    return JSON.stringify(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64"));
  }
  return JSON.stringify(value) ?? "null";
}

function sleepFor(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** An event of a stream; its window is not waited for (an end follows at once). */
function writeEvent(res: FrontExchange, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

function sendText(
  res: FrontExchange,
  status: number,
  text: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  res.sendWhole(
    status,
    { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) },
    text,
  );
}

function sendJson(
  res: FrontExchange,
  status: number,
  value: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  sendText(res, status, JSON.stringify(value), headers);
}

function describe(value: unknown): string {
  if (value === undefined) return "no body";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object without input";
  return `a ${typeof value}`;
}

type BodyRead = { ok: true; value: unknown } | { ok: false; status: number; error: string };

/** The body the front thread read (within the limit it enforces) as JSON; none is `undefined`. */
function parseJsonBody(body: Uint8Array | undefined): BodyRead {
  if (body === undefined) return { ok: true, value: undefined };
  if (body.byteLength > LB_MAX_BODY_BYTES) {
    return {
      ok: false,
      status: 413,
      error: `the request body is larger than the limit of ${LB_MAX_BODY_BYTES} bytes (30 MB)`,
    };
  }
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");
  if (text.trim() === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return {
      ok: false,
      status: 400,
      error: `the request body is not JSON: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
}

/** The OpenAI error a failed request's message holds (defineOpenAIHandler fails with its JSON), else a server error. */
function openAIErrorOf(message: string): { status: number; body: unknown } {
  try {
    const parsed = JSON.parse(message) as { error?: { message?: unknown; type?: unknown } };
    if (typeof parsed.error?.message === "string" && typeof parsed.error.type === "string") {
      // The harness's OpenAI route answers with the same status for the same error.
      return { status: statusOf(parsed as OpenAIErrorBody), body: parsed };
    }
  } catch {
    // Not JSON: a plain error text, sent as a server error below.
  }
  return { status: 500, body: { error: { message, type: "server_error", param: null, code: null } } };
}
