import { timingSafeEqual } from "node:crypto";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { settle } from "../../task-sink.js";
import type { WorkerChange, WorkerState } from "../fleet/worker-registry.js";
import type { WorkerStartups } from "../fleet/worker-startup.js";
import { HostCheck } from "../http/host-check.js";
import { closeServer, connectInMemory, listen, sendError, sendJson } from "../http/http-util.js";
import type { RateLimiter } from "../http/rate-limits.js";
import {
  ANY_METHOD,
  headerOf,
  noBody,
  type ParsedBody,
  type RouteCall,
  type RouteFamily,
  type RouteRequest,
  routeOf,
  routesOf,
  tableOf,
} from "../http/route-table.js";
import { Router, serveFamily } from "../http/router.js";
import type { JobView } from "../jobs/job-entry.js";
import type { JobEvent } from "../jobs/job-events.js";
import { recentJobs } from "../jobs/job-list.js";
import type { JobService } from "../jobs/job-service.js";
import type { JobStore } from "../jobs/job-store.js";
import type { TimelineSpan } from "../jobs/job-timeline.js";
import type { WebhookAttempt } from "../jobs/webhooks.js";
import type { HandlerInfo } from "./handler-info.js";
import { SseFeed } from "./sse-feed.js";
import { isStaticFile, SECURITY_HEADERS, sendStatic } from "./static-files.js";
import {
  type EndCounts,
  type EndpointView,
  endpointViewOf,
  jobDetailOf,
  jobRowOf,
  noEnds,
  type WorkerView,
  workerViewOf,
  workerViewsOf,
} from "./views.js";

/** Where the page lives on its listener: a prefix no `/v2/…` route can take. */
export const DASHBOARD_PATH = "/_runlet/";
/** Jobs the page's first snapshot carries, newest first, per endpoint. */
const SNAPSHOT_JOBS = 200;
/** Lapsed workers remembered for the page, per harness (the oldest are forgotten). */
const MAX_LAPSED_WORKERS = 50;
/** Jobs whose handler metrics are remembered for the job view (the oldest are forgotten). */
const MAX_METRICS_JOBS = 1_000;
/** Largest handler metrics record kept for one job, in bytes of JSON. */
const MAX_METRICS_BYTES = 16_384;
/** Largest request the page may post: a `/runsync` body plus its wrapper. */
const SUBMIT_ENVELOPE_BYTES = 4_096;

/** What the dashboard reads from and does to its harness. */
export interface DashboardSource {
  readonly store: JobStore;
  /** The job API's operations (submit, cancel, retry), shared with the client routes. */
  readonly jobs: JobService;
  readonly limiter: RateLimiter;
  /** The harness's main key: the page's only key. */
  readonly apiKey: string;
  readonly host: string;
  readonly port: number;
  /** Host header names answered besides IP addresses, localhost and `host` (docs/harness.md, "Host names"). */
  readonly allowedHosts?: readonly string[] | true;
  readonly bodyLimits: {
    readonly runBytes: number;
    readonly runsyncBytes: number;
    /** Most levels of objects and arrays a job's request body may nest. */
    readonly maxJsonDepth: number;
  };
  readonly webhookAttempts: () => WebhookAttempt[];
  /** A job's timeline spans (the job view draws them). */
  readonly timeline?: (jobId: string) => TimelineSpan[];
  /** The workers' start-ups, as their spawners report them. */
  readonly startups: WorkerStartups;
  /** Subscribes to the harness's job events (progress, stream chunks, ends). */
  readonly onJobEvent: (listener: (event: JobEvent) => void) => () => void;
  /** The body the "run a request" form starts with. */
  readonly sampleRequest: unknown;
  readonly logger: Logger | undefined;
  /** The load-balancing endpoints' workers and latest requests (docs/load-balancing.md). @default none */
  readonly loadBalancers?: () => unknown;
}

/** What the dashboard's routes do, bound to one dashboard. */
interface DashboardRoutesContext {
  readonly authorized: (request: RouteRequest) => boolean;
  readonly openFeed: (res: ServerResponse) => void;
  readonly state: (res: ServerResponse) => void;
  readonly loadBalancers: (res: ServerResponse) => void;
  readonly onJob: (res: ServerResponse, id: string, action: "cancel" | "retry" | undefined) => Promise<void>;
  readonly submit: (res: ServerResponse, body: ParsedBody) => Promise<void>;
  readonly bodyLimits: DashboardSource["bodyLimits"];
}

type DashboardAccess = "main" | "none";
const route = routeOf<DashboardRoutesContext, DashboardAccess>();
const small = () => noBody("request");

/**
 * The data routes under `/_runlet/api/`, each taking the main key and reading its body under its
 * limit through the router (no route reads a byte before the key is checked); none is rate-limited.
 */
export const DASHBOARD_API_ROUTES = tableOf<DashboardRoutesContext, DashboardAccess>()({
  events: route({
    method: "GET",
    path: "events",
    access: "main",
    rate: "unlimited",
    body: small,
    handle: (ctx, { res }) => ctx.openFeed(res),
  }),
  state: route({
    method: "GET",
    path: "state",
    access: "main",
    rate: "unlimited",
    body: small,
    handle: (ctx, { res }) => ctx.state(res),
  }),
  "load-balancers": route({
    method: "GET",
    path: "load-balancers",
    access: "main",
    rate: "unlimited",
    body: small,
    handle: (ctx, { res }) => ctx.loadBalancers(res),
  }),
  jobs: [
    route({
      method: "POST",
      path: "jobs",
      access: "main",
      rate: "unlimited",
      body: ({ bodyLimits }) => ({
        limitBytes: Math.max(bodyLimits.runBytes, bodyLimits.runsyncBytes) + SUBMIT_ENVELOPE_BYTES,
        // The job's request body is one level down, in `body`.
        maxDepth: bodyLimits.maxJsonDepth + 1,
        subject: "request",
        tooLargeStatus: 413,
      }),
      handle: (ctx, { res }, body) => ctx.submit(res, body),
    }),
    route({
      method: "GET",
      path: "jobs/:id",
      access: "main",
      rate: "unlimited",
      body: small,
      handle: (ctx, { res, params }) => ctx.onJob(res, params.id, undefined),
    }),
    route({
      method: "POST",
      path: "jobs/:id/cancel",
      access: "main",
      rate: "unlimited",
      body: small,
      handle: (ctx, { res, params }) => ctx.onJob(res, params.id, "cancel"),
    }),
    route({
      method: "POST",
      path: "jobs/:id/retry",
      access: "main",
      rate: "unlimited",
      body: small,
      handle: (ctx, { res, params }) => ctx.onJob(res, params.id, "retry"),
    }),
  ],
});

/** The page's own files: no key, no data. HEAD answers as GET, without the body (Node drops it). */
const PAGE_ROUTES = [
  route({
    method: ["GET", "HEAD"],
    path: "",
    access: "none",
    rate: "unlimited",
    body: small,
    handle: (_ctx, { res }) => sendStatic(res, "index.html"),
  }),
  route({
    method: ["GET", "HEAD"],
    path: ":file",
    access: "none",
    rate: "unlimited",
    body: small,
    handle: (_ctx, { req, res, url, params }) =>
      isStaticFile(params.file)
        ? sendStatic(res, params.file)
        : sendError(res, 404, `no route for ${req.method} ${url.pathname}`, { headers: SECURITY_HEADERS }),
  }),
];

/** `/` and `/_runlet` lead to the page. */
const REDIRECT_ROUTES = tableOf<DashboardRoutesContext, DashboardAccess>()({
  "": route({
    method: ANY_METHOD,
    path: "",
    access: "none",
    rate: "unlimited",
    body: small,
    handle: redirect,
  }),
  _runlet: route({
    method: ANY_METHOD,
    path: "_runlet",
    access: "none",
    rate: "unlimited",
    body: small,
    handle: redirect,
  }),
});

function redirect(_ctx: DashboardRoutesContext, { res }: RouteCall): void {
  res.writeHead(302, { ...SECURITY_HEADERS, location: DASHBOARD_PATH });
  res.end();
}

/** The dashboard listener's families: the data routes, the page's files, the redirect. */
function dashboardFamilies(
  ctx: DashboardRoutesContext,
): RouteFamily<DashboardRoutesContext, DashboardAccess>[] {
  const authorize = (access: DashboardAccess, request: RouteRequest) =>
    access === "none" || ctx.authorized(request) ? ("ok" as const) : ("unauthorized" as const);
  const notFound = ({ req, res, url }: RouteCall) =>
    sendError(res, 404, `no route for ${req.method} ${url.pathname}`, { headers: SECURITY_HEADERS });
  return [
    {
      name: "dashboard",
      mount: `${DASHBOARD_PATH}api/`,
      claims: "all",
      context: ctx,
      routes: routesOf(DASHBOARD_API_ROUTES),
      defaultAccess: "main",
      authorize,
      refuse: (call, refusal) => {
        const { res, url } = call;
        switch (refusal.reason) {
          case "key":
            return sendError(
              res,
              401,
              "missing or wrong API key: the dashboard needs the harness's main key",
              {
                headers: SECURITY_HEADERS,
              },
            );
          case "malformed":
            return sendError(res, 400, `malformed path: ${url.pathname}`, { headers: SECURITY_HEADERS });
          case "rate":
          case "body":
            return sendError(res, refusal.status, refusal.message, { headers: SECURITY_HEADERS });
          default:
            return notFound(call);
        }
      },
    },
    {
      name: "dashboard page",
      mount: DASHBOARD_PATH,
      claims: "all",
      context: ctx,
      routes: PAGE_ROUTES,
      defaultAccess: "none",
      authorize,
      refuse: notFound,
    },
    {
      name: "dashboard redirect",
      mount: "/",
      claims: "named",
      context: ctx,
      routes: routesOf(REDIRECT_ROUTES),
      defaultAccess: "none",
      authorize,
      refuse: notFound,
    },
  ];
}

/**
 * The harness's live page on its own listener: endpoints, workers, jobs, one job's details and a
 * form to submit one. Static files need no key; every data route and the event feed need the
 * harness's main key as `Authorization: Bearer <key>` (401 without). Updates are pushed as
 * server-sent events from the harness's job events and worker changes; nothing polls the store.
 */
export class Dashboard {
  readonly #source: DashboardSource;
  readonly #server: Server;
  readonly #feed = new SseFeed();
  readonly #ends = new Map<string, EndCounts>();
  readonly #restarts = new Map<string, number>();
  readonly #lapsed = new Map<string, WorkerView>();
  readonly #dirty = new Set<string>();
  readonly #handlers = new Map<string, HandlerInfo>();
  readonly #metrics = new Map<string, Readonly<Record<string, number | string>>>();
  readonly #unsubscribe: () => void;
  #flushing = false;
  #url = "";
  #closing: Promise<void> | undefined;

  private constructor(source: DashboardSource) {
    this.#source = source;
    this.#unsubscribe = source.onJobEvent((event) => this.#onJobEvent(event));
    const router = new Router(
      dashboardFamilies({
        authorized: (request) => this.#authorized(request),
        openFeed: (res) => this.#feed.open(res, { type: "snapshot", data: this.#snapshot() }),
        state: (res) => sendJson(res, 200, this.#snapshot(), SECURITY_HEADERS),
        loadBalancers: (res) =>
          sendJson(res, 200, { loadBalancers: source.loadBalancers?.() ?? [] }, SECURITY_HEADERS),
        onJob: (res, id, action) => this.#onJob(res, id, action),
        submit: (res, body) => this.#submit(res, body),
        bodyLimits: source.bodyLimits,
      }).map((family) => serveFamily(family)),
      (req, res, url) =>
        sendError(res, 404, `no route for ${req.method} ${url.pathname}`, { headers: SECURITY_HEADERS }),
    );
    const hosts = new HostCheck(source.allowedHosts ?? [], source.host);
    this.#server = createServer((req, res) => {
      if (hosts.refuse(req, res, SECURITY_HEADERS)) return;
      settle(router.serve(req, res, "http://dashboard"), (err) => {
        source.logger?.error({ err }, "dashboard request failed");
        sendError(res, 500, `internal dashboard error: ${err instanceof Error ? err.message : String(err)}`);
      });
    });
  }

  /** Starts the page's listener. */
  static async start(source: DashboardSource): Promise<Dashboard> {
    const dashboard = new Dashboard(source);
    dashboard.#url = await listen(dashboard.#server, source.port, source.host);
    return dashboard;
  }

  /**
   * The page without a listener (`Harness.inMemory`): requests reach it through {@link connect}
   * alone; its `url` is `http://localhost/_runlet/`, where nothing listens.
   */
  static inMemory(source: DashboardSource): Dashboard {
    const dashboard = new Dashboard(source);
    dashboard.#url = "http://localhost";
    return dashboard;
  }

  /** A connection to the page's listener in memory (`Harness.connectDashboard`). */
  connect(): Duplex {
    return connectInMemory(this.#server);
  }

  /** The page's address, without the key: `http://127.0.0.1:<port>/_runlet/`. */
  get url(): string {
    return `${this.#url}${DASHBOARD_PATH}`;
  }

  /** A job was created, started or requeued (the store's hook). */
  jobChanged(job: JobView): void {
    if (this.#feed.active) this.#feed.send("job", jobRowOf(job));
    this.#touch(job.endpointId);
  }

  /** A worker appeared, pinged or lapsed (the store's hook). */
  workerChanged(worker: WorkerState, change: WorkerChange): void {
    const key = `${worker.endpointId}\u0000${worker.id}`;
    if (change === "lapsed") {
      this.#lapsed.delete(key);
      this.#lapsed.set(key, workerViewOf(worker, "lapsed"));
      if (this.#lapsed.size > MAX_LAPSED_WORKERS) this.#lapsed.delete(this.#lapsed.keys().next().value!);
    } else if (change === "seen") {
      this.#lapsed.delete(key);
    }
    this.#touch(worker.endpointId);
  }

  /** A worker of `endpointId` reported a start-up step (or exited). */
  workerStartupChanged(endpointId: string): void {
    this.#touch(endpointId);
  }

  /** A worker process of `endpointId` exited on its own and is being replaced. */
  workerRestarted(endpointId: string): void {
    this.#restarts.set(endpointId, (this.#restarts.get(endpointId) ?? 0) + 1);
    this.#touch(endpointId);
  }

  /**
   * What the handler of `endpointId` takes and does (its input as JSON Schema, streaming, OpenAI):
   * the form starts from it. Told again after a reload, it replaces the old one.
   */
  describeEndpoint(endpointId: string, info: HandlerInfo): void {
    this.#handlers.set(endpointId, info);
    this.#feed.send("handler", { endpointId, info });
  }

  /**
   * A job's handler metrics (`ctx.metrics`) as its worker reported them when it finished; the job
   * view shows them. The latest {@link MAX_METRICS_JOBS} jobs' are kept; a record over
   * {@link MAX_METRICS_BYTES} is replaced by a note.
   */
  jobMetrics(jobId: string, metrics: Readonly<Record<string, number | string>>): void {
    const bytes = Buffer.byteLength(JSON.stringify(metrics));
    const kept =
      bytes > MAX_METRICS_BYTES
        ? { dropped: `metrics were ${bytes} bytes, over ${MAX_METRICS_BYTES}` }
        : metrics;
    this.#metrics.delete(jobId);
    this.#metrics.set(jobId, kept);
    if (this.#metrics.size > MAX_METRICS_JOBS) this.#metrics.delete(this.#metrics.keys().next().value!);
    this.#feed.send("metrics", { jobId, metrics: kept });
  }

  /** Ends the event feed and closes the listener. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#unsubscribe();
      this.#feed.close();
      await closeServer(this.#server);
    })();
    return this.#closing;
  }

  #onJobEvent(event: JobEvent): void {
    switch (event.type) {
      case "progress": {
        if (!this.#feed.active) return;
        // The store applies an update before telling of it, so its count is this update's place (from 1).
        const index = this.#source.store.table.get(event.jobId)?.progress.length ?? 0;
        this.#feed.send("progress", { jobId: event.jobId, index, output: event.output });
        return;
      }
      case "stream":
        this.#feed.send("stream", { jobId: event.jobId, index: event.index, chunk: event.chunk });
        return;
      case "end": {
        const status = event.job.status;
        if (status !== "IN_QUEUE" && status !== "IN_PROGRESS") {
          const ends = this.#ends.get(event.endpointId) ?? noEnds();
          ends[status]++;
          this.#ends.set(event.endpointId, ends);
        }
        const job = this.#source.store.table.get(event.jobId);
        if (job !== undefined) this.#feed.send("job", jobRowOf(job));
        this.#touch(event.endpointId);
        return;
      }
    }
  }

  /** Marks an endpoint changed; its line and workers are sent once, after the current burst of changes. */
  #touch(endpointId: string): void {
    if (!this.#feed.active) return;
    this.#dirty.add(endpointId);
    if (this.#flushing) return;
    this.#flushing = true;
    setImmediate(() => {
      this.#flushing = false;
      for (const id of this.#dirty) {
        if (!this.#source.store.table.hasEndpoint(id)) continue;
        this.#feed.send("endpoint", { endpoint: this.#endpoint(id), workers: this.#workers(id) });
      }
      this.#dirty.clear();
    });
  }

  #endpoint(id: string): EndpointView {
    const counts = this.#source.store.workers.counts(id, 0, (w) => this.#source.startups.get(id, w));
    return endpointViewOf(
      this.#source.store.table,
      id,
      this.#ends.get(id) ?? noEnds(),
      this.#source.limiter.state(id, counts.idle + counts.running),
      this.#restarts.get(id) ?? 0,
    );
  }

  #workers(endpointId: string): WorkerView[] {
    const connected = workerViewsOf(
      endpointId,
      this.#source.store.workers.list(endpointId),
      this.#source.startups.entries(endpointId),
    );
    const lapsed = [...this.#lapsed.values()].filter(
      (w) => w.endpointId === endpointId && !connected.some((c) => c.id === w.id),
    );
    return [...connected, ...lapsed];
  }

  #snapshot() {
    const table = this.#source.store.table;
    const ids = table.endpointIds();
    return {
      endpoints: ids.map((id) => this.#endpoint(id)),
      workers: ids.flatMap((id) => this.#workers(id)),
      jobs: ids
        .flatMap((id) => recentJobs(table, id, { max: SNAPSHOT_JOBS }))
        .sort((a, b) => b.createdAt - a.createdAt)
        .slice(0, SNAPSHOT_JOBS)
        .map(jobRowOf),
      sampleRequest: this.#source.sampleRequest,
      handlers: Object.fromEntries(this.#handlers),
    };
  }

  #authorized(request: RouteRequest): boolean {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(headerOf(request.headers, "authorization") ?? "");
    if (match === null) return false;
    const given = Buffer.from(match[1]!);
    const key = Buffer.from(this.#source.apiKey);
    return given.length === key.length && timingSafeEqual(given, key);
  }

  async #onJob(res: ServerResponse, id: string, action: string | undefined): Promise<void> {
    const { jobs } = this.#source;
    const fail = (status: number, message: string) =>
      sendError(res, status, message, { headers: SECURITY_HEADERS });
    const found =
      action === "cancel" ? jobs.cancel(id) : action === "retry" ? jobs.retry(id) : jobs.lookup(id);
    if (!found.ok) return fail(found.status, found.message);
    const job = found.value;
    sendJson(
      res,
      200,
      jobDetailOf(
        job,
        this.#source.webhookAttempts(),
        this.#metrics.get(job.id),
        this.#source.timeline?.(job.id),
      ),
      SECURITY_HEADERS,
    );
  }

  /** `POST api/jobs {endpointId, route: "run" | "runsync", body}`: a job created as that route would. */
  async #submit(res: ServerResponse, read: ParsedBody): Promise<void> {
    const { jobs, store } = this.#source;
    const fail = (status: number, message: string, issues?: readonly string[]) =>
      sendError(res, status, message, { issues, headers: SECURITY_HEADERS });
    const envelope = read.value as Record<string, unknown> | null;
    if (typeof envelope !== "object" || envelope === null) {
      return fail(400, "send a JSON object {endpointId, route, body}");
    }
    const { endpointId, route, body } = envelope;
    if (typeof endpointId !== "string" || !store.table.hasEndpoint(endpointId)) {
      return fail(404, `endpoint ${JSON.stringify(endpointId)} not found`);
    }
    if (route !== "run" && route !== "runsync") {
      return fail(400, `route must be "run" or "runsync", got ${JSON.stringify(route)}`);
    }
    // No raw text to hand on: the body was parsed with its envelope, where 1e400 is already Infinity.
    const made = jobs.submit(endpointId, route, {
      value: body ?? null,
      bytes: Buffer.byteLength(JSON.stringify(body ?? null)),
    });
    if (!made.ok) return fail(made.status, made.message, made.issues);
    sendJson(res, 200, { id: made.value.id, status: made.value.status }, SECURITY_HEADERS);
  }
}
