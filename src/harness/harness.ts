import { createServer, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { RunletError } from "../errors.js";
import type { Health } from "../protocol/api.js";
import { settle } from "../task-sink.js";
import { TimerSet } from "./clock.js";
import { Dashboard, type DashboardSource, type HandlerInfo } from "./dashboard/index.js";
import { type WorkerView, workerViewsOf } from "./dashboard/views.js";
import { Scaler } from "./fleet/scaler.js";
import { type WorkerEnvOptions, workerEnvFor } from "./fleet/worker-env.js";
import { type StartupUpdate, type WorkerStartup, WorkerStartups } from "./fleet/worker-startup.js";
import { KeyRing } from "./http/auth.js";
import { corsStep } from "./http/cors.js";
import { HostCheck } from "./http/host-check.js";
import { closeServer, connectInMemory, listen, sendError } from "./http/http-util.js";
import { exceedsValueDepth } from "./http/json-depth.js";
import { RateLimiter } from "./http/rate-limits.js";
import { assertDistinctNames, Router, serveFamily } from "./http/router.js";
import { type JobSnapshot, type NewJob, recordOf, snapshotOf } from "./jobs/job-entry.js";
import { JobEventHub, type JobEventListener } from "./jobs/job-events.js";
import { JobService } from "./jobs/job-service.js";
import { JobStore } from "./jobs/job-store.js";
import { JobTimelines, type TimelineSpan } from "./jobs/job-timeline.js";
import { untilTerminal } from "./jobs/job-waits.js";
import { type WebhookAttempt, WebhookSender, webhookUrlProblem } from "./jobs/webhooks.js";
import { type LbEndpointOptions, type LoadBalancer, LoadBalancers } from "./lb/index.js";
import {
  type EndpointWorkerView,
  type HarnessManagement,
  harnessManagement,
} from "./management-api/index.js";
import { JobFeed, OPENAI_ROUTE_TABLE, openAIFamily } from "./openai/index.js";
import {
  checkEndpoint,
  checkEndpointUpdate,
  checkLbFleet,
  type EndpointOptions,
  type EndpointUpdate,
  type HarnessOptions,
  type LbEndpointUpdate,
  type ResolvedOptions,
  resolveOptions,
} from "./options.js";
import { CLIENT_ROUTE_TABLE, clientFamily } from "./routes/client-routes.js";
import {
  type Fault,
  type RecordedRequest,
  type RequestFilter,
  RequestLog,
  type WorkerRoute,
} from "./routes/request-log.js";
import { WORKER_ROUTE_TABLE, workerFamily } from "./routes/worker-routes.js";

/**
 * Why a harness in memory starts no worker: a started worker would be handed the harness's URL,
 * `http://localhost`, where nothing of it listens.
 */
const IN_MEMORY_SPAWN =
  "Harness.inMemory binds no port: it starts no workers (no endpoint spawn, managementSpawn or load-balancing fleet); connect workers with the worker's connect option, or start a harness with startHarness";

/** What {@link Harness.memory} reports. */
export interface HarnessMemory {
  /** Records in the request log (at most `maxRecordedRequests`). */
  readonly requestLogRecords: number;
  /** Bytes they are counted as (at most `maxRecordedRequestBytes`). */
  readonly requestLogBytes: number;
  /** Ended jobs kept for their retention. */
  readonly finishedJobs: number;
  /** Bytes of their bodies (at most `maxFinishedJobBytes`, but for the newest one). */
  readonly finishedBytes: number;
  /** Deleted jobs remembered by id, status and times. */
  readonly tombstones: number;
  /** Webhook delivery attempts kept for `webhookAttempts()` (at most 1 000). */
  readonly webhookAttempts: number;
  /** Bytes they are counted as (at most 1 MiB). */
  readonly webhookAttemptBytes: number;
}

/**
 * runlet's local copy of the platform: the client-facing job API and the worker-facing routes of
 * one or more endpoints, on one HTTP server. Start it with {@link startHarness}.
 */
export class Harness {
  readonly #options: ResolvedOptions;
  readonly #server: Server;
  readonly #timers: TimerSet;
  readonly #store: JobStore;
  /** The job API's operations, for the client routes and the dashboard alike. */
  readonly #jobs: JobService;
  readonly #requests: RequestLog;
  readonly #keys: KeyRing;
  readonly #webhooks: WebhookSender;
  /** Each job's spans as the harness sees it (docs/observability.md, "The harness's timeline"). */
  readonly #timelines: JobTimelines;
  readonly #limiter: RateLimiter;
  readonly #scaler: Scaler;
  readonly #management: HarnessManagement;
  /** The load-balancing endpoints (`/lb/<id>/...`). */
  readonly #balancers: LoadBalancers;
  readonly #events: JobEventHub;
  readonly #startups = new WorkerStartups();
  /**
   * Workers the harness stopped — for a release's rollout, or above a lowered maximum — and not
   * lapsed yet (`endpoint/worker`): no longer reported.
   */
  readonly #replaced = new Set<string>();
  #dashboard: Dashboard | undefined;
  #url = "";
  /** Made by {@link inMemory}: nothing listens. */
  #inMemory = false;
  #closing: Promise<void> | undefined;

  private constructor(options: ResolvedOptions, inMemory = false) {
    this.#options = options;
    this.#inMemory = inMemory;
    this.#timers = new TimerSet(options.clock);
    this.#requests = new RequestLog(options.maxRecordedRequests, options.maxRecordedRequestBytes);
    this.#keys = new KeyRing(options.apiKey, options.keys);
    this.#webhooks = new WebhookSender(options.webhooks, this.#timers, options.logger);
    this.#limiter = new RateLimiter(options.rateLimits, options.clock);
    this.#events = new JobEventHub((err) => options.logger?.error({ err }, "a job event listener threw"));
    const about = (job: { id: string; endpointId: string }) => ({
      jobId: job.id,
      endpointId: job.endpointId,
    });
    this.#timelines = new JobTimelines(
      () => options.clock.now(),
      (workerId) => this.#workerFirstSeen(workerId),
    );
    this.#store = new JobStore({
      clock: options.clock,
      timers: this.#timers,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      // In memory no worker can ping (its heartbeat thread would need a socket): by default there,
      // until a worker pings, any request of its own keeps it alive instead.
      requestsKeepAlive: (options.keepAliveBy ?? (inMemory ? "requests" : "pings")) === "requests",
      maxFinishedBytes: options.maxFinishedJobBytes,
      events: {
        onTerminal: (job) => {
          this.#timelines.ended(job);
          if (job.webhook !== undefined) this.#webhooks.send(job.id, job.webhook, recordOf(job));
          if (this.#events.active) this.#events.emit({ type: "end", ...about(job), job: snapshotOf(job) });
        },
        onProgress: (job, output) => {
          this.#timelines.progress(job);
          if (this.#events.active) this.#events.emit({ type: "progress", ...about(job), output });
        },
        onChunk: (job, chunk, index, bytes) => {
          // The post's own size: serialising the chunk again cost a fifth of the harness's CPU on a 100 MB item.
          this.#timelines.chunk(job, bytes);
          // The event is built only for a listener: two objects a chunk otherwise (a token stream's every post).
          if (this.#events.active) this.#events.emit({ type: "stream", ...about(job), index, chunk });
        },
        onQueueChange: (endpointId) => this.#scaler.schedule(endpointId),
        onJobChange: (job) => {
          this.#timelines.changed(job);
          this.#dashboard?.jobChanged(job);
        },
        onWorkerChange: (worker, change) => {
          // A lapsed worker is forgotten; should it come back, it is counted by its requests.
          if (change === "lapsed") {
            this.#startups.forget(worker.endpointId, worker.id);
            this.#replaced.delete(`${worker.endpointId}/${worker.id}`);
          }
          this.#dashboard?.workerChanged(worker, change);
        },
      },
    });
    this.#jobs = new JobService({ store: this.#store, options });
    this.#scaler = new Scaler({
      store: this.#store,
      clock: options.clock,
      envFor: (endpointId, podId, pingIntervalMs) =>
        this.workerEnv(endpointId, { podId, ...(pingIntervalMs === undefined ? {} : { pingIntervalMs }) }),
      logger: options.logger,
      onStartup: (endpointId, podId, update) => this.reportWorkerStartup(endpointId, podId, update),
      startupOf: (endpointId, podId) => this.#startups.get(endpointId, podId),
      // One that never connected is not listed, and would never lapse out of the set.
      onTrim: (endpointId, podId) => {
        if (this.#store.workers.get(endpointId, podId) !== undefined)
          this.#replaced.add(`${endpointId}/${podId}`);
      },
    });
    // Templates and serverless endpoints in memory (docs/management.md): an endpoint created there
    // is served here, its workers started by managementSpawn (by default the first endpoint's).
    this.#management = harnessManagement({
      apiKey: options.apiKey,
      spawn: options.managementSpawn,
      v1: options.managementV1,
      onError: (err) =>
        options.logger?.error({ err }, "management: could not apply an endpoint change to the harness"),
    });
    this.#management.attach(this);
    this.#balancers = new LoadBalancers(options.loadBalancers, this.#keys, options.clock);
    // Every route of the API listener, declared one way (route-table.ts), tried in this order:
    // the worker, client and OpenAI families under /v2/<endpoint>/, the extraRoutes seam, then
    // the management copy (/v2/<reserved resource>, /v1/).
    assertDistinctNames(WORKER_ROUTE_TABLE, CLIENT_ROUTE_TABLE, OPENAI_ROUTE_TABLE);
    const cors = corsStep(options.corsOrigins);
    const router = new Router(
      [
        // CORS first, when asked for (local development): it marks a page's requests and answers their preflights.
        ...(cors === undefined ? [] : [cors]),
        serveFamily(
          workerFamily({
            store: this.#store,
            requests: this.#requests,
            keys: this.#keys,
            takeTimeoutMs: options.takeTimeoutMs,
            jobDoneBytes: options.limits.jobDoneBytes,
            streamBodyBytes: options.limits.streamBodyBytes,
            maxJsonDepth: options.limits.maxJsonDepth,
            onStopPod: (ep, workerId) => this.#scaler.replace(ep, workerId),
            logger: options.logger,
          }),
        ),
        serveFamily(
          clientFamily({
            store: this.#store,
            jobs: this.#jobs,
            keys: this.#keys,
            limiter: this.#limiter,
            options,
            health: (ep) => this.health(ep),
          }),
        ),
        serveFamily(
          openAIFamily({
            store: this.#store,
            keys: this.#keys,
            limiter: this.#limiter,
            options,
            feed: new JobFeed((listener) => this.#events.subscribe(listener)),
          }),
        ),
        this.#balancers.serve,
        ...(options.extraRoutes === undefined ? [] : [options.extraRoutes]),
        this.#management.routes.serve,
      ],
      (req, res, url) => sendError(res, 404, `no route for ${req.method} ${url.pathname}`),
    );
    const hosts = new HostCheck(options.allowedHosts, options.host);
    this.#server = createServer((req, res) => {
      if (hosts.refuse(req, res)) return;
      settle(router.serve(req, res, this.#url), (err) => {
        options.logger?.error({ err, url: req.url }, "harness request failed");
        sendError(res, 500, `internal harness error: ${err instanceof Error ? err.message : String(err)}`);
      });
    });
  }

  /** Starts a harness listening on `host:port`. */
  static async start(options: HarnessOptions = {}): Promise<Harness> {
    const harness = new Harness(resolveOptions(options));
    await harness.#listen();
    return harness;
  }

  /**
   * A harness that binds no port: requests reach its listener through {@link connect} alone, and
   * its dashboard's (with `dashboard`) through {@link connectDashboard}, over streams in memory.
   * For tests of the routes and the job API; its `url` is `http://localhost` and nothing listens
   * there, so it takes no endpoint that starts workers (`spawn`).
   */
  static inMemory(options: HarnessOptions = {}): Harness {
    const resolved = resolveOptions(options);
    if (resolved.endpoints.some((ep) => ep.spawn !== undefined) || options.managementSpawn !== undefined) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", IN_MEMORY_SPAWN);
    }
    const harness = new Harness(resolved, true);
    harness.#url = "http://localhost";
    for (const ep of resolved.endpoints) harness.addEndpoint(ep);
    const page = resolved.dashboard;
    if (page !== undefined) harness.#dashboard = Dashboard.inMemory(harness.#dashboardSource(page));
    return harness;
  }

  /**
   * A connection to the API listener in memory, as a TCP connection would be: node:http parses
   * what is written to the returned stream and answers on it (give it to an HTTP client as its
   * socket, e.g. `http.request`'s `createConnection`). What `inject` is to fastify, for tests.
   */
  connect(): Duplex {
    return connectInMemory(this.#server);
  }

  /**
   * A connection to the dashboard's listener in memory, as {@link connect} is to the API's; throws
   * `RUNLET_HARNESS_CONFIG` when the harness has no dashboard.
   */
  connectDashboard(): Duplex {
    if (this.#dashboard === undefined) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", "connectDashboard: this harness has no dashboard");
    }
    return this.#dashboard.connect();
  }

  /**
   * The load-balancing endpoint `id` (the `loadBalancers` option): add its workers, read its
   * workers and requests. @throws RunletError `RUNLET_HARNESS_CONFIG` when there is none.
   */
  loadBalancer(id: string): LoadBalancer {
    const balancer = this.#balancers.get(id);
    if (balancer === undefined) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", `no load-balancing endpoint ${JSON.stringify(id)}`);
    }
    return balancer;
  }

  /** The base URL, `http://127.0.0.1:<port>`. */
  get url(): string {
    return this.#url;
  }

  /** The live page's address (without the key), when `dashboard` is on; open it with `#token=<apiKey>`. */
  get dashboardUrl(): string | undefined {
    return this.#dashboard?.url;
  }

  /**
   * Tells the dashboard that a worker process of `endpointId` exited on its own and is being
   * replaced (`runlet dev` calls this); the page shows the count. A no-op without the dashboard.
   */
  workerRestarted(endpointId: string): void {
    this.#dashboard?.workerRestarted(endpointId);
  }

  /**
   * Tells the harness how a worker of `endpointId` is getting on with its start-up (docs/harness.md,
   * "Workers starting"): `{type: "starting"}` when it is spawned, its phases and setup progress,
   * `ready`, and `exited` when its process ends. Until ready, `/health` counts it as initializing,
   * never idle, and the dashboard shows it starting with its phase and progress; once exited it is
   * never counted. The spawners the scaler runs report through the function they are given;
   * `runlet dev` calls this for the worker processes it runs itself.
   */
  reportWorkerStartup(endpointId: string, workerId: string, update: StartupUpdate): void {
    if (!this.#store.table.hasEndpoint(endpointId)) return;
    this.#startups.report(endpointId, workerId, update);
    // An exited worker that never connected has nothing left to show.
    if (update.type === "exited" && this.#store.workers.get(endpointId, workerId) === undefined) {
      this.#startups.forget(endpointId, workerId);
    }
    this.#dashboard?.workerStartupChanged(endpointId);
  }

  /**
   * Hands no more jobs of `endpointId` to the worker `workerId` (its pod id): a job-take it holds is
   * answered 204 now, and each later one at once. A job already handed to it stays its own (its
   * result, progress and pings count as before). Call it before telling a worker to stop, so a job
   * sent while it winds down waits for another worker instead of running on the one going away:
   * `runlet dev` retires its old workers on a reload, and the scaler each worker it stops. A no-op
   * for an unknown endpoint.
   */
  retireWorker(endpointId: string, workerId: string): void {
    this.#store.retire(endpointId, workerId);
  }

  /**
   * The workers of an endpoint as the dashboard lists them: connected ones (`connected`, or
   * `starting` with their phase and setup progress until ready, or `exited` once their process
   * ended), then those starting and not connected yet.
   */
  workers(endpointId: string): WorkerView[] {
    this.#endpoint(endpointId);
    return workerViewsOf(
      endpointId,
      this.#store.workers.list(endpointId),
      this.#startups.entries(endpointId),
    );
  }

  /** What the harness knows of a worker's start-up (undefined for a worker no spawner reports on). */
  workerStartup(endpointId: string, workerId: string): WorkerStartup | undefined {
    return this.#startups.get(endpointId, workerId);
  }

  /**
   * Tells the dashboard what the handler of `endpointId` takes (its input schema) and does
   * (streams, serves OpenAI), so its form starts from a valid example (`runlet dev` and
   * `createHarness` call this; see `describeHandler`). A no-op without the dashboard.
   */
  describeEndpoint(endpointId: string, info: HandlerInfo): void {
    this.#dashboard?.describeEndpoint(endpointId, info);
  }

  /**
   * Gives the dashboard a job's handler metrics (`ctx.metrics`), which reach runlet only in its
   * worker's `Finished.` log line (`runlet dev` reads them there). A no-op without the dashboard.
   */
  reportJobMetrics(jobId: string, metrics: Readonly<Record<string, number | string>>): void {
    this.#dashboard?.jobMetrics(jobId, metrics);
  }

  /** The main API key (opens every endpoint). */
  get apiKey(): string {
    return this.#options.apiKey;
  }

  /** Ids of the endpoints served. */
  endpointIds(): string[] {
    return this.#store.table.endpointIds();
  }

  /**
   * Adds a load-balancing endpoint while running (`/lb/<id>/...`; a no-op when it exists): the
   * management copy calls this for an endpoint created with `type: LOAD_BALANCER`, whose `fleet`
   * starts the handler's workers in load-balancing mode (docs/load-balancing.md).
   */
  addLoadBalancer(options: LbEndpointOptions): void {
    if (this.#inMemory && options.fleet !== undefined) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", `addLoadBalancer: ${IN_MEMORY_SPAWN}`);
    }
    checkLbFleet(options.id, options.fleet);
    if (this.#store.table.hasEndpoint(options.id)) {
      throw new RunletError(
        "RUNLET_HARNESS_CONFIG",
        `addLoadBalancer: ${JSON.stringify(options.id)} is a queue endpoint of this harness`,
      );
    }
    this.#balancers.add(options);
  }

  /** Adds an endpoint while running (a no-op when it exists). */
  addEndpoint(endpoint: { readonly id: string } & EndpointOptions): void {
    if (this.#store.table.hasEndpoint(endpoint.id)) return;
    if (this.#inMemory && endpoint.spawn !== undefined) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", `addEndpoint: ${IN_MEMORY_SPAWN}`);
    }
    checkEndpoint(endpoint);
    this.#store.addEndpoint(endpoint.id, { executionTimeoutMs: endpoint.executionTimeoutMs ?? 600_000 });
    if (endpoint.spawn !== undefined) {
      this.#scaler.add(
        endpoint.id,
        endpoint.spawn,
        endpoint.minWorkers ?? 0,
        endpoint.maxWorkers ?? Math.max(1, endpoint.minWorkers ?? 0),
        endpoint.pingIntervalMs,
        endpoint.idleTimeoutMs,
      );
    }
  }

  /**
   * Changes a queue endpoint while running (the management copy's `PATCH /v2/serverless/{id}`
   * calls this): `executionTimeoutMs` applies to the jobs made from now on (those already queued
   * or running keep the one they were made with); `minWorkers` / `maxWorkers` are the scaler's new
   * bounds — a raised minimum starts workers at once, a raised maximum lets waiting jobs start
   * more, and a lowered maximum stops the workers above it that hold no job (newest first), and a
   * busy one once its jobs are done; `idleTimeoutMs` is the scaler's new idle timeout (null: no
   * scale-down). What is left out stays.
   * @throws RunletError `RUNLET_HARNESS_CONFIG` for an unknown endpoint, a value past its limit
   * (named with the limit), a maximum below the minimum, or worker counts or an idle timeout on an
   * endpoint without `spawn`; nothing is changed then.
   */
  updateEndpoint(endpointId: string, change: EndpointUpdate): void {
    this.#endpoint(endpointId);
    const bounds = this.#scaler.bounds(endpointId);
    const parsed = checkEndpointUpdate("updateEndpoint", endpointId, change, bounds);
    if (parsed.executionTimeoutMs !== undefined) {
      this.#store.updateExecutionTimeout(endpointId, parsed.executionTimeoutMs);
    }
    if (bounds !== undefined && (parsed.minWorkers !== undefined || parsed.maxWorkers !== undefined)) {
      this.#scaler.resize(
        endpointId,
        parsed.minWorkers ?? bounds.minWorkers,
        parsed.maxWorkers ?? bounds.maxWorkers,
      );
    }
    if (parsed.idleTimeoutMs !== undefined) {
      this.#scaler.setIdleTimeout(endpointId, parsed.idleTimeoutMs ?? undefined);
    }
  }

  /**
   * Changes the fleet of a load-balancing endpoint while running (the management copy's `PATCH
   * /v2/serverless/{id}` of a `LOAD_BALANCER` endpoint calls this): `minWorkers` / `maxWorkers` as
   * {@link updateEndpoint}'s, a lowered maximum stopping the workers above it with no request in
   * flight (and a busy one once its requests end); `concurrency` is what each worker started from
   * now on takes at once — running ones keep theirs until a release replaces them; `idleTimeoutMs`
   * is the fleet's new idle timeout (null: no scale-down).
   * @throws RunletError `RUNLET_HARNESS_CONFIG` for an unknown endpoint or one whose workers the
   * harness does not start (no fleet), a value past its limit, or a maximum below the minimum.
   */
  updateLoadBalancer(endpointId: string, change: LbEndpointUpdate): void {
    this.loadBalancer(endpointId);
    const fleet = this.#balancers.fleet(endpointId);
    if (fleet === undefined) {
      throw new RunletError(
        "RUNLET_HARNESS_CONFIG",
        `updateLoadBalancer(${JSON.stringify(endpointId)}): the harness starts no workers for this endpoint (it has no fleet), so there is nothing to change`,
      );
    }
    fleet.update(checkEndpointUpdate("updateLoadBalancer", endpointId, change, fleet.settings));
  }

  /**
   * Removes an endpoint while running (the management copy's `DELETE /v2/serverless/{id}` calls
   * this): its routes answer 404 at once; its waiting and running jobs are deleted, as a ttl
   * deletes them (no webhook; `job(id)` shows `deleted: true`; a running job's worker gets a
   * job-stop); held requests on it end; the workers the harness started for it are stopped.
   * Resolves once they have stopped, with false when there was no such endpoint. A load-balancing
   * endpoint (`addLoadBalancer`) is removed the same way: its route answers 404, requests waiting
   * for a worker end, the workers started for it stop.
   */
  async removeEndpoint(endpointId: string): Promise<boolean> {
    if (!this.#store.table.hasEndpoint(endpointId)) return this.#balancers.remove(endpointId);
    const stopping = this.#scaler.remove(endpointId);
    for (const key of this.#replaced) if (key.startsWith(`${endpointId}/`)) this.#replaced.delete(key);
    this.#store.removeEndpoint(endpointId);
    this.#startups.removeEndpoint(endpointId);
    await stopping;
    return true;
  }

  /**
   * Calls `listener` for each progress update, stream chunk and job end, on every endpoint, as
   * they happen (what `runlet dev` logs). Returns a function that stops the calls.
   */
  onJobEvent(listener: JobEventListener): () => void {
    return this.#events.subscribe(listener);
  }

  /**
   * The platform environment (docs/protocol.md, "Environment") with which a worker connects to
   * `endpointId`. A harness in memory ({@link inMemory}) gives no ping URL: its worker connects
   * through {@link connect} (the worker's `connect` option), and the heartbeat thread, which pings
   * over sockets, would find nothing listening.
   */
  workerEnv(endpointId: string, options: WorkerEnvOptions = {}): Record<string, string> {
    this.#endpoint(endpointId);
    return workerEnvFor(this.#url, endpointId, this.#options.apiKey, {
      ...options,
      gpuTypeId: options.gpuTypeId ?? this.#options.gpuTypeId,
      ping: !this.#inMemory,
    });
  }

  /** Queues a job in-process, bypassing the client API; returns its id. */
  enqueue(endpointId: string, job: NewJob): string {
    this.#endpoint(endpointId);
    if (job.id !== undefined && this.#store.table.get(job.id) !== undefined) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", `enqueue: a job with id "${job.id}" already exists`);
    }
    // The body `{"input": ...}` is one level above the input: the limit /run applies.
    const depth = this.#options.limits.maxJsonDepth;
    if (exceedsValueDepth(job.input, depth - 1)) {
      throw new RunletError(
        "RUNLET_HARNESS_CONFIG",
        `enqueue: input nests objects and arrays deeper than the limit of ${depth} levels of a request body (or holds a cycle)`,
      );
    }
    const tooLong = job.webhook === undefined ? undefined : webhookUrlProblem(job.webhook);
    if (tooLong !== undefined) throw new RunletError("RUNLET_HARNESS_CONFIG", `enqueue: ${tooLong}`);
    return this.#store.create(endpointId, "run", job, this.#options.limits.runRetentionMs).id;
  }

  /** A copy of a job (deleted jobs included, with `deleted: true`), or undefined. */
  job(jobId: string): JobSnapshot | undefined {
    const job = this.#store.table.get(jobId);
    return job === undefined ? undefined : snapshotOf(job);
  }

  /**
   * Resolves with the job once it is terminal. Rejects with `RUNLET_HARNESS_NO_JOB` (unknown id),
   * `RUNLET_HARNESS_JOB_DELETED` (deleted before it ended) or `RUNLET_HARNESS_WAIT_TIMEOUT` (still
   * going after `timeoutMs`, real time; 30 s by default).
   */
  async waitForJob(jobId: string, options: { readonly timeoutMs?: number } = {}): Promise<JobSnapshot> {
    return snapshotOf(await untilTerminal(this.#store.waits, jobId, options.timeoutMs ?? 30_000));
  }

  /**
   * The sizes of the harness's bounded structures, for tests that hold it to its bounds: the request
   * log (records, bytes), ended jobs kept for their retention (count, bytes) and deleted jobs
   * remembered as tombstones.
   */
  memory(): HarnessMemory {
    const log = this.#requests.size;
    const hooks = this.#webhooks.size;
    return {
      requestLogRecords: log.records,
      requestLogBytes: log.bytes,
      ...this.#store.memory(),
      webhookAttempts: hooks.records,
      webhookAttemptBytes: hooks.bytes,
    };
  }

  /** Every worker-route request so far, in arrival order. */
  requests(filter?: RequestFilter): RecordedRequest[] {
    return this.#requests.list(filter);
  }

  /**
   * Cancels a job; a running one's worker gets it in its next job-stop poll. An ended or deleted
   * job is left as it is; an unknown id throws `RUNLET_HARNESS_NO_JOB`.
   */
  stopJob(jobId: string): void {
    const job = this.#store.table.get(jobId);
    if (job === undefined) {
      throw new RunletError("RUNLET_HARNESS_NO_JOB", `stopJob: no job "${jobId}"`, { details: { jobId } });
    }
    this.#store.cancel(job);
  }

  /** Applies `fault` to the next `count` requests of `route` (any endpoint), before normal handling. */
  injectFault(route: WorkerRoute, fault: Fault, count = 1): void {
    this.#requests.inject(route, fault, count);
  }

  /**
   * The job's timeline as the harness saw it: queue, setup (a worker's first job), take, handler,
   * progress, stream, result and webhook spans (docs/observability.md, "The harness's timeline").
   */
  timeline(jobId: string): TimelineSpan[] {
    return this.#timelines.spans(jobId, this.#webhooks.attempts());
  }

  #workerFirstSeen(workerId: string): { seen: number; ready: number | undefined } | undefined {
    for (const endpointId of this.#store.table.endpointIds()) {
      const worker = this.#store.workers.get(endpointId, workerId);
      if (worker !== undefined) return { seen: worker.firstSeenAt, ready: worker.firstTakeAt };
    }
    return undefined;
  }

  /** Every webhook delivery attempt so far. */
  webhookAttempts(): WebhookAttempt[] {
    return this.#webhooks.attempts();
  }

  /** `/health` of an endpoint. */
  health(endpointId: string): Health {
    this.#endpoint(endpointId);
    return {
      jobs: this.#store.table.counts(endpointId),
      workers: this.#store.workers.counts(endpointId, this.#initializing(endpointId), (id) =>
        this.#startups.get(endpointId, id),
      ),
    };
  }

  /** Workers starting: the scaler's, and those reported by others (`runlet dev`'s own pool). */
  #initializing(endpointId: string): number {
    let n = this.#scaler.initializing(endpointId);
    for (const [id, startup] of this.#startups.entries(endpointId)) {
      if (this.#scaler.started(endpointId, id) || startup.state === "exited") continue;
      // Starting, or ready and not connected yet (its first request is on its way).
      if (startup.state === "starting" || this.#store.workers.get(endpointId, id) === undefined) n++;
    }
    return n;
  }

  /**
   * The connected workers of an endpoint as the management copy's `GET /v2/serverless/{id}/workers`
   * reports them: starting (INITIALIZING), unhealthy, holding a job (RUNNING) or IDLE.
   */
  workersOf(endpointId: string): EndpointWorkerView[] {
    if (this.#balancers.get(endpointId) !== undefined) return this.#balancers.workersOf(endpointId);
    const now = this.#options.clock.now();
    return this.#store.workers.list(endpointId).flatMap((w) => {
      const startup = this.#startups.get(endpointId, w.id)?.state;
      if (startup === "exited" || this.#replaced.has(`${endpointId}/${w.id}`)) return [];
      const status =
        startup === "starting"
          ? "INITIALIZING"
          : w.unhealthy !== undefined
            ? "UNHEALTHY"
            : w.jobs.size > 0
              ? "RUNNING"
              : "IDLE";
      return [{ id: w.id, status, startedAt: Date.now() - (now - w.firstSeenAt) }];
    });
  }

  /** Stops a worker the harness started so that the scaler starts a fresh one (a release rolling out). */
  replaceWorker(endpointId: string, workerId: string): void {
    if (this.#balancers.replaceWorker(endpointId, workerId)) return;
    if (!this.#scaler.started(endpointId, workerId)) return;
    this.#replaced.add(`${endpointId}/${workerId}`);
    this.#scaler.replace(endpointId, workerId);
  }

  /** Waits until the workers the scaler is starting for `endpointId` have started. */
  workersStarted(endpointId: string): Promise<void> {
    return this.#scaler.settled(endpointId);
  }

  /** Stops workers it started, answers held requests, closes the server. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #close(): Promise<void> {
    const steps: Array<() => unknown> = [
      () => this.#scaler.close(),
      () => this.#balancers.close(),
      () => this.#store.close(),
      () => this.#timers.clearAll(),
      () => this.#webhooks.close(),
      () => this.#dashboard?.close(),
      () => this.#events.clear(),
      () => closeServer(this.#server),
    ];
    for (const step of steps) {
      try {
        await step();
      } catch (err) {
        this.#options.logger?.error({ err }, "harness close step failed");
      }
    }
  }

  #endpoint(endpointId: string): void {
    if (!this.#store.table.hasEndpoint(endpointId)) {
      throw new RunletError("RUNLET_HARNESS_CONFIG", `unknown endpoint "${endpointId}"`);
    }
  }

  async #listen(): Promise<void> {
    this.#url = await listen(this.#server, this.#options.port, this.#options.host);
    for (const ep of this.#options.endpoints) this.addEndpoint(ep);
    const page = this.#options.dashboard;
    if (page !== undefined) {
      try {
        this.#dashboard = await Dashboard.start(this.#dashboardSource(page));
      } catch (err) {
        // Its port is taken, say: the harness it belongs to must not stay open behind the error.
        await this.close();
        throw err;
      }
    }
  }

  /** What the dashboard reads and calls (with `dashboard` on). */
  #dashboardSource(page: NonNullable<ResolvedOptions["dashboard"]>): DashboardSource {
    const o = this.#options;
    return {
      store: this.#store,
      jobs: this.#jobs,
      limiter: this.#limiter,
      apiKey: o.apiKey,
      host: o.host,
      allowedHosts: o.allowedHosts,
      port: page.port,
      bodyLimits: {
        runBytes: o.limits.runBytes,
        runsyncBytes: o.limits.runsyncBytes,
        maxJsonDepth: o.limits.maxJsonDepth,
      },
      webhookAttempts: () => this.#webhooks.attempts(),
      timeline: (jobId) => this.timeline(jobId),
      startups: this.#startups,
      onJobEvent: (listener) => this.#events.subscribe(listener),
      sampleRequest: page.sampleRequest,
      logger: o.logger,
      loadBalancers: () => this.#balancers.views(),
    };
  }
}

/**
 * Starts a harness.
 *
 * @example
 * await using h = await startHarness({ endpoints: [{ id: "echo" }], takeTimeoutMs: 500 });
 * const id = h.enqueue("echo", { input: { text: "hi" } });
 * const job = await h.waitForJob(id);
 */
export function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  return Harness.start(options);
}
