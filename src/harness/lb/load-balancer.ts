import { type IncomingMessage, request, type ServerResponse } from "node:http";
import { pipeline, Transform } from "node:stream";
import { RunletError } from "../../errors.js";
import { LOAD_BALANCER } from "../../protocol/limits.js";
import { WaiterSet } from "../../wait.js";
import { sendJson } from "../http/http-util.js";

/**
 * A load-balancing endpoint of the harness (docs/load-balancing.md, "The harness and `runlet
 * dev`"): no queue; each request goes straight to one of its workers' HTTP servers, as the
 * platform's load balancer sends it. It polls each worker's health (200 ready, 204 starting,
 * anything else out of routing), waits up to `waitMs` for a worker with a free slot ("no workers
 * available" after), enforces the 30 MB and 5.5 min limits, sets `X-Runpod-Worker-Id`, and honours
 * the three affinity modes.
 */

/** Options of one load-balancing endpoint. */
export interface LoadBalancerOptions {
  /** The endpoint id: its requests are `/lb/<id>/<any path>` on the harness. */
  readonly id: string;
  /** How long a request waits for a worker with a free slot, ms. @default 120_000 (the platform's 2 min) */
  readonly waitMs?: number;
  /** How long a strict-affinity request waits for its worker, ms. @default 300_000 (about 5 min) */
  readonly strictWaitMs?: number;
  /** A request still unanswered after this long answers 504, ms. @default 330_000 (5.5 min) */
  readonly maxRequestMs?: number;
  /** Largest request and answer body, bytes. @default 31_457_280 (30 MB) */
  readonly maxBodyBytes?: number;
  /** How often each worker's health is polled, ms. @default 500 */
  readonly healthIntervalMs?: number;
  /** The health path polled. @default "/ping" */
  readonly healthPath?: string;
  /**
   * Called while a request finds no worker with a free slot (each time it looks), so workers can
   * be started for it (the harness's fleet of an endpoint created through the management copy).
   * @default none
   */
  readonly onDemand?: () => void;
  /**
   * Called when a worker's last request in flight ends, so a fleet above a lowered maximum can stop
   * it. @default none
   */
  readonly onIdle?: (workerId: string) => void;
}

/** A worker of a load-balancing endpoint: where its server listens and how many requests it takes at once. */
export interface LbWorkerInfo {
  readonly id: string;
  /** Its base URL, `http://127.0.0.1:<PORT>`. */
  readonly url: string;
  /** Requests it runs at once. @default 1 */
  readonly concurrency?: number;
}

/** What health last said of a worker. */
export type LbWorkerHealth = "starting" | "ready" | "unhealthy";

/** A worker as the dashboard and tests see it. */
export interface LbWorkerView {
  readonly id: string;
  readonly url: string;
  readonly concurrency: number;
  readonly inFlight: number;
  readonly health: LbWorkerHealth;
  readonly served: number;
}

/** One request as the dashboard and tests see it. */
export interface LbRequestView {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly workerId: string | undefined;
  /** The affinity asked for: none, soft, strict or strict-resume. */
  readonly affinity: string;
  readonly ms: number;
  readonly at: number;
}

interface Member {
  readonly info: Required<LbWorkerInfo>;
  health: LbWorkerHealth;
  inFlight: number;
  served: number;
}

/** How many requests {@link LoadBalancer.requests} keeps. */
const MAX_RECENT_REQUESTS = 1_000;

/** Request headers not passed on (hop-by-hop, and the affinity header, which is the balancer's). */
const HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "host",
  "x-runpod-worker-id",
]);

/** A parsed `X-Runpod-Worker-Id` request header. */
type Affinity = { mode: "none" } | { mode: "soft" | "strict" | "strict-resume"; workerId: string };

function affinityOf(header: string | string[] | undefined): Affinity {
  const value = (Array.isArray(header) ? header[0] : header)?.trim() ?? "";
  if (value === "") return { mode: "none" };
  const [first, second] = value.split(/\s+/, 2);
  if ((first === "strict" || first === "strict-resume") && second !== undefined && second !== "") {
    return { mode: first, workerId: second };
  }
  return { mode: "soft", workerId: value };
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RunletError(
      "RUNLET_HARNESS_CONFIG",
      `load balancer: ${name} must be an integer ≥ 1, got ${value}`,
    );
  }
  return value;
}

/** One load-balancing endpoint. */
export class LoadBalancer {
  readonly id: string;
  readonly #waitMs: number;
  readonly #strictWaitMs: number;
  readonly #maxRequestMs: number;
  readonly #maxBodyBytes: number;
  readonly #healthIntervalMs: number;
  readonly #healthPath: string;
  readonly #onDemand: (() => void) | undefined;
  readonly #onIdle: ((workerId: string) => void) | undefined;
  readonly #members = new Map<string, Member>();
  /** Wakes requests waiting for a slot (a request ended, a worker became ready). */
  /** Requests waiting for a worker: woken when one frees or joins, else they look again each health interval. */
  readonly #waiters = new WaiterSet();
  readonly #recent: LbRequestView[] = [];
  readonly #timer: NodeJS.Timeout;

  constructor(options: LoadBalancerOptions) {
    if (typeof options.id !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(options.id)) {
      throw new RunletError(
        "RUNLET_HARNESS_CONFIG",
        `load balancer: id must be 1-64 letters, digits, - or _, got ${JSON.stringify(options.id)}`,
      );
    }
    this.id = options.id;
    this.#waitMs = positive("waitMs", options.waitMs, LOAD_BALANCER.waitMs);
    this.#strictWaitMs = positive("strictWaitMs", options.strictWaitMs, 300_000);
    this.#maxRequestMs = positive("maxRequestMs", options.maxRequestMs, LOAD_BALANCER.maxRequestMs);
    this.#maxBodyBytes = positive("maxBodyBytes", options.maxBodyBytes, LOAD_BALANCER.maxBodyBytes);
    this.#healthIntervalMs = positive("healthIntervalMs", options.healthIntervalMs, 500);
    this.#healthPath = options.healthPath ?? LOAD_BALANCER.healthPath;
    this.#onDemand = options.onDemand;
    this.#onIdle = options.onIdle;
    this.#timer = setInterval(() => this.#pollHealth(), this.#healthIntervalMs);
    this.#timer.unref();
  }

  /** Adds a worker (starting until its health says 200); its health is polled at once. */
  addWorker(info: LbWorkerInfo): void {
    const concurrency = positive("concurrency", info.concurrency, 1);
    this.#members.set(info.id, {
      info: { id: info.id, url: info.url.replace(/\/+$/, ""), concurrency },
      health: "starting",
      inFlight: 0,
      served: 0,
    });
    this.#pollOne(info.id);
  }

  /** Removes a worker from routing: strict requests naming it answer 404 `affinity_worker_gone`. */
  removeWorker(id: string): void {
    this.#members.delete(id);
    this.#wake();
  }

  /** The workers, for the dashboard and tests. */
  workers(): LbWorkerView[] {
    return [...this.#members.values()].map((m) => ({
      id: m.info.id,
      url: m.info.url,
      concurrency: m.info.concurrency,
      inFlight: m.inFlight,
      health: m.health,
      served: m.served,
    }));
  }

  /** The latest requests (at most 1 000), oldest first. */
  requests(): LbRequestView[] {
    return this.#recent.slice(-MAX_RECENT_REQUESTS);
  }

  /** Stops polling health and releases waiting requests (they answer "no workers available"). */
  close(): void {
    clearInterval(this.#timer);
    this.#members.clear();
    this.#wake();
  }

  #wake(): void {
    this.#waiters.wakeAll();
  }

  #pollHealth(): void {
    for (const id of this.#members.keys()) this.#pollOne(id);
  }

  #pollOne(id: string): void {
    const member = this.#members.get(id);
    if (member === undefined) return;
    const req = request(`${member.info.url}${this.#healthPath}`, { timeout: 2_000, agent: false }, (res) => {
      res.resume();
      const health: LbWorkerHealth =
        res.statusCode === 200 ? "ready" : res.statusCode === 204 ? "starting" : "unhealthy";
      if (health !== member.health) {
        member.health = health;
        this.#wake();
      }
    });
    req.on("timeout", () => req.destroy(new Error("health timed out")));
    req.on("error", () => {
      if (member.health !== "unhealthy") member.health = "unhealthy";
    });
    req.end();
  }

  /** A ready worker with a free slot, the least busy first; `prefer` first when it qualifies. */
  #pick(prefer: string | undefined, only: boolean): Member | undefined {
    const free = (m: Member | undefined): m is Member =>
      m !== undefined && m.health === "ready" && m.inFlight < m.info.concurrency;
    if (prefer !== undefined) {
      const preferred = this.#members.get(prefer);
      if (free(preferred)) return preferred;
      if (only) return undefined;
    }
    let best: Member | undefined;
    for (const m of this.#members.values()) {
      if (free(m) && (best === undefined || m.inFlight < best.inFlight)) best = m;
    }
    return best;
  }

  /** Waits for a worker (`pick` true) until `waitMs`; undefined when none came. */
  async #waitFor(
    pick: () => Member | undefined | "gone",
    waitMs: number,
    signal: AbortSignal,
  ): Promise<Member | undefined | "gone"> {
    const end = Date.now() + waitMs;
    for (;;) {
      const found = pick();
      if (found !== undefined) return found;
      const left = end - Date.now();
      if (left <= 0 || signal.aborted) return undefined;
      await this.#waiters.wait(Math.min(left, this.#healthIntervalMs), signal);
    }
  }

  /** Serves one request whose path (after `/lb/<id>`) is `path`. */
  async serve(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const started = Date.now();
    const affinity = affinityOf(req.headers["x-runpod-worker-id"]);
    let member: Member | undefined;
    res.on("finish", () => {
      // Trimmed in halves, so a request's entry costs the same however many came before.
      if (this.#recent.length >= 2 * MAX_RECENT_REQUESTS) this.#recent.splice(0, MAX_RECENT_REQUESTS);
      this.#recent.push({
        method: req.method ?? "GET",
        path,
        status: res.statusCode,
        workerId: member?.info.id,
        affinity: affinity.mode,
        ms: Date.now() - started,
        at: started,
      });
    });
    const length = Number(req.headers["content-length"]);
    if (Number.isFinite(length) && length > this.#maxBodyBytes) {
      sendJson(res, 413, { error: `the request body is over the ${this.#maxBodyBytes}-byte limit (30 MB)` });
      req.resume();
      return;
    }
    const hangUp = new AbortController();
    res.on("close", () => hangUp.abort());
    let found: Member | undefined | "gone";
    if (affinity.mode === "strict" || affinity.mode === "strict-resume") {
      const wanted = affinity.workerId;
      found = await this.#waitFor(
        () => (this.#members.has(wanted) ? this.#pick(wanted, true) : "gone"),
        this.#strictWaitMs,
        hangUp.signal,
      );
      if (found === "gone") {
        sendJson(res, 404, { error: "affinity_worker_gone", workerId: wanted });
        return;
      }
      if (found === undefined) {
        sendJson(res, 400, { error: "worker_timeout", reason: "timed out waiting for worker" });
        return;
      }
    } else {
      const prefer = affinity.mode === "soft" ? affinity.workerId : undefined;
      const pick = (): Member | undefined => {
        const member = this.#pick(prefer, false);
        if (member === undefined) this.#onDemand?.();
        return member;
      };
      found = await this.#waitFor(pick, this.#waitMs, hangUp.signal);
      if (found === undefined || found === "gone") {
        sendJson(res, 503, { error: "no workers available" }, { "retry-after": "1" });
        return;
      }
    }
    if (hangUp.signal.aborted) return;
    member = found;
    await this.#forward(req, res, path, found);
  }

  #forward(req: IncomingMessage, res: ServerResponse, path: string, member: Member): Promise<void> {
    member.inFlight += 1;
    member.served += 1;
    return new Promise<void>((resolve) => {
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        member.inFlight -= 1;
        clearTimeout(timer);
        this.#wake();
        if (member.inFlight === 0) this.#onIdle?.(member.info.id);
        resolve();
      };
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (!HOP.has(name) && value !== undefined) headers[name] = value;
      }
      const up = request(`${member.info.url}${path}`, { method: req.method, headers, agent: false });
      const timer = setTimeout(() => {
        up.destroy();
        if (!res.headersSent)
          sendJson(res, 504, { error: "the request ran past the 5.5 min processing limit" });
        else res.destroy();
        release();
      }, this.#maxRequestMs);
      up.on("response", (answer) => {
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (!HOP.has(name) && value !== undefined) out[name] = value;
        }
        out["x-runpod-worker-id"] = member.info.id;
        const declared = Number(answer.headers["content-length"]);
        if (Number.isFinite(declared) && declared > this.#maxBodyBytes) {
          answer.resume();
          sendJson(
            res,
            502,
            { error: `the worker's answer is over the ${this.#maxBodyBytes}-byte limit (30 MB)` },
            {
              "x-runpod-worker-id": member.info.id,
            },
          );
          release();
          return;
        }
        res.writeHead(answer.statusCode ?? 502, out);
        res.flushHeaders();
        let bytes = 0;
        const limit = this.#maxBodyBytes;
        const counter = new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            bytes += chunk.length;
            if (bytes > limit) callback(new Error("the worker's answer passed the 30 MB limit"));
            else callback(null, chunk);
          },
        });
        pipeline(answer, counter, res, () => release());
      });
      up.on("error", () => {
        if (!res.headersSent) {
          sendJson(
            res,
            502,
            { error: "the worker did not answer" },
            { "x-runpod-worker-id": member.info.id },
          );
        } else res.destroy();
        release();
      });
      // The client hung up: the worker sees its request end the same way.
      res.on("close", () => {
        if (!res.writableFinished) up.destroy();
        release();
      });
      let received = 0;
      req.on("data", (chunk: Buffer) => {
        received += chunk.length;
        if (received > this.#maxBodyBytes) {
          up.destroy();
          if (!res.headersSent)
            sendJson(res, 413, {
              error: `the request body is over the ${this.#maxBodyBytes}-byte limit (30 MB)`,
            });
          req.resume();
          return;
        }
        if (!up.write(chunk)) {
          req.pause();
          up.once("drain", () => req.resume());
        }
      });
      req.on("end", () => up.end());
    });
  }
}
