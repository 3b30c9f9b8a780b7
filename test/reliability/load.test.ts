import { isDeepStrictEqual } from "node:util";
import pino from "pino";
import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { ManualClock, startHarness } from "../../src/harness/index.js";
import { defineHandler, startWorker } from "../../src/index.js";
import { seededRandom, waitFor } from "./helpers.js";

/**
 * Load against low rate limits, made deterministic: the rate window runs on a ManualClock that
 * stands still during a round, so each round is exactly one window however slowly this machine
 * sends (with the real clock a slow run spreads over many windows and may rightly see no 429).
 * A frozen clock fires no ttl, retention, executionTimeout or heartbeat lapse; held requests
 * (the worker's long polls) run on real time, so the worker keeps draining the queue.
 */
const CLIENTS = 200;
const WINDOW_MS = 10_000;
const RUN_PER_WINDOW = 100;
const RUN_CONCURRENT = 20;
const STATUS_PER_WINDOW = 400;
const STATUS_CONCURRENT = 50;
/** Per client and round, both routes together: a safety cap, far above what a client needs. */
const MAX_REQUESTS_PER_CLIENT = 200;
/** Wall-clock safety cap of one round; hitting it fails the test. */
const ROUND_CAP_MS = 45_000;

const RUN_RATE = `rate limit of /run exceeded: ${RUN_PER_WINDOW} requests per ${WINDOW_MS} ms on this endpoint`;
const RUN_BUSY = `concurrency limit of /run exceeded: ${RUN_CONCURRENT} requests at a time on this endpoint`;
const STATUS_RATE = `rate limit of /status exceeded: ${STATUS_PER_WINDOW} requests per ${WINDOW_MS} ms on this endpoint`;
const STATUS_BUSY = `concurrency limit of /status exceeded: ${STATUS_CONCURRENT} requests at a time on this endpoint`;
/** A rate 429 waits out the rest of the window: all of it, as the clock stands still. */
const RATE_RETRY_AFTER = String(WINDOW_MS / 1000);
const LIVE_STATUSES = new Set(["IN_QUEUE", "IN_PROGRESS", "COMPLETED"]);

const echo = defineHandler({ concurrency: 8, handler: ({ input }) => ({ echo: input }) });

type Route = "run" | "status";
type Outcome = "ok" | "rate" | "busy" | "other";

/** What one round saw, over every client. */
interface Round {
  readonly ok: Record<Route, number>;
  readonly rate: Record<Route, number>;
  readonly busy: Record<Route, number>;
  /** Anything that is not an expected 200 or 429, described. */
  readonly problems: string[];
  /** Clients that reached the request cap before a rate 429 on both routes. */
  readonly unfinished: string[];
  timedOut: boolean;
}

describe("reliability: many clients against low rate limits", () => {
  it(`injects ${CLIENTS} concurrent clients on /run and /status, each until rate-limited on both, in two frozen windows: exactly the per-window limit admitted, only 200s and 429s, and /health adds up`, async () => {
    const clock = new ManualClock();
    await using h = await startHarness({
      clock,
      takeTimeoutMs: 1_000,
      rateLimits: {
        windowMs: WINDOW_MS,
        // One worker must not lift the limits through the dynamic rule.
        requestsPerWorker: 1,
        concurrentPerWorker: 1,
        rules: {
          run: { perWindow: RUN_PER_WINDOW, concurrent: RUN_CONCURRENT },
          status: { perWindow: STATUS_PER_WINDOW, concurrent: STATUS_CONCURRENT },
        },
      },
    });
    const worker = await startWorker(echo, {
      env: h.workerEnv("local", { podId: "load" }),
      logger: pino({ level: "silent" }),
      retryBaseMs: 10,
      retryCapMs: 100,
    });
    const agent = new Agent({ connections: CLIENTS + 10, headersTimeout: 15_000, bodyTimeout: 15_000 });
    const headers = { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" };
    const runIds = [h.enqueue("local", { input: { seed: true } })];

    /** One request; classifies the answer and checks its exact body and headers. */
    const send = async (
      round: Round,
      route: Route,
      random: () => number,
      label: string,
    ): Promise<Outcome> => {
      const id = runIds[Math.floor(random() * runIds.length)]!;
      const path = route === "run" ? "/v2/local/run" : `/v2/local/status/${id}`;
      const problem = (what: string): Outcome => {
        round.problems.push(`${label} ${route}: ${what}`);
        return "other";
      };
      let status: number;
      let retryAfter: unknown;
      let body: Record<string, unknown>;
      try {
        const res = await request(`${h.url}${path}`, {
          method: route === "run" ? "POST" : "GET",
          dispatcher: agent,
          headers,
          ...(route === "run" ? { body: JSON.stringify({ input: { label } }) } : {}),
        });
        status = res.statusCode;
        retryAfter = res.headers["retry-after"];
        body = (await res.body.json()) as Record<string, unknown>;
      } catch (err) {
        return problem(`network error: ${(err as Error).message}`);
      }
      const shown = JSON.stringify(body).slice(0, 200);
      if (status === 200 && route === "run") {
        if (Object.keys(body).sort().join() !== "id,status" || body["status"] !== "IN_QUEUE") {
          return problem(`200 with ${shown}`);
        }
        runIds.push(String(body["id"]));
        round.ok.run++;
        return "ok";
      }
      if (status === 200) {
        if (body["id"] !== id || !LIVE_STATUSES.has(String(body["status"])))
          return problem(`200 with ${shown}`);
        round.ok.status++;
        return "ok";
      }
      if (status !== 429) return problem(`${status} ${shown}`);
      const [rateText, busyText] = route === "run" ? [RUN_RATE, RUN_BUSY] : [STATUS_RATE, STATUS_BUSY];
      if (isDeepStrictEqual(body, { error: rateText, status: 429 })) {
        if (retryAfter !== RATE_RETRY_AFTER)
          return problem(`rate 429 with Retry-After ${String(retryAfter)}`);
        round.rate[route]++;
        return "rate";
      }
      if (isDeepStrictEqual(body, { error: busyText, status: 429 })) {
        if (retryAfter !== "1") return problem(`concurrency 429 with Retry-After ${String(retryAfter)}`);
        round.busy[route]++;
        return "busy";
      }
      return problem(`429 with ${shown}`);
    };

    /** CLIENTS clients at once, each sending until it had a rate 429 on /run and on /status. */
    const runRound = async (n: number): Promise<Round> => {
      const round: Round = {
        ok: { run: 0, status: 0 },
        rate: { run: 0, status: 0 },
        busy: { run: 0, status: 0 },
        problems: [],
        unfinished: [],
        timedOut: false,
      };
      // Checked between requests; a request that hangs ends at the agent's 15 s timeouts.
      const cap = setTimeout(() => {
        round.timedOut = true;
      }, ROUND_CAP_MS);
      const client = async (index: number) => {
        const label = `round ${n} client ${index}`;
        const random = seededRandom(n * 1_000 + index + 1);
        const limited = { run: false, status: false };
        let sent = 0;
        while ((!limited.run || !limited.status) && sent < MAX_REQUESTS_PER_CLIENT && !round.timedOut) {
          for (const route of ["run", "status"] as const) {
            if (limited[route] || round.timedOut) continue;
            sent++;
            limited[route] = (await send(round, route, random, label)) === "rate";
          }
        }
        if (!limited.run || !limited.status) round.unfinished.push(`${label} after ${sent} requests`);
      };
      try {
        await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
      } finally {
        clearTimeout(cap);
      }
      return round;
    };

    /** Waits for the worker to drain the queue, then checks `/health`, in process and over HTTP. */
    const expectHealth = async (created: number) => {
      await waitFor(
        "every accepted job to finish",
        () => h.health("local").jobs.completed === created,
        30_000,
      );
      const jobs = { completed: created, failed: 0, inProgress: 0, inQueue: 0, retried: 0 };
      expect(h.health("local").jobs).toEqual(jobs);
      const res = await request(`${h.url}/v2/local/health`, { headers, dispatcher: agent });
      expect(res.statusCode).toBe(200);
      expect(((await res.body.json()) as { jobs: unknown }).jobs).toEqual(jobs);
    };

    /** One round is exactly one window: the limit admitted, and one rate 429 per client and route. */
    const expectRound = (round: Round) => {
      expect(round.timedOut, `a round ran into its ${ROUND_CAP_MS} ms safety cap`).toBe(false);
      expect(round.problems).toEqual([]);
      expect(round.unfinished).toEqual([]);
      expect(round.ok).toEqual({ run: RUN_PER_WINDOW, status: STATUS_PER_WINDOW });
      expect(round.rate).toEqual({ run: CLIENTS, status: CLIENTS });
      // Concurrency 429s depend on how the requests overlap: allowed, not required.
    };

    try {
      const first = await runRound(1);
      expectRound(first);
      await expectHealth(RUN_PER_WINDOW + 1);

      // The next window: the limiter starts counting afresh, and admits exactly as many again.
      clock.advance(WINDOW_MS);
      const second = await runRound(2);
      expectRound(second);
      expect(first.ok.run + second.ok.run).toBe(2 * RUN_PER_WINDOW);
      expect(first.ok.status + second.ok.status).toBe(2 * STATUS_PER_WINDOW);
      expect(runIds).toHaveLength(2 * RUN_PER_WINDOW + 1);
      await expectHealth(2 * RUN_PER_WINDOW + 1);
    } finally {
      await worker.close();
      await agent.close();
    }
  }, 180_000);
});
