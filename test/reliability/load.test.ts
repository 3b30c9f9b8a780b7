import pino from "pino";
import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { startHarness } from "../../src/harness/index.js";
import { defineHandler, startWorker } from "../../src/index.js";
import { seededRandom, waitFor } from "./helpers.js";

const CLIENTS = Number(process.env["LOAD_CLIENTS"] ?? 200);
const DURATION_MS = 8_000;
const WINDOW_MS = 1_000;
const RUN_PER_WINDOW = 100;
const RUN_CONCURRENT = 20;
const STATUS_PER_WINDOW = 400;
const STATUS_CONCURRENT = 50;

const echo = defineHandler({ concurrency: 8, handler: ({ input }) => ({ echo: input }) });

interface Tally {
  readonly statuses: Map<string, number>;
  readonly others: string[];
  runAccepted: number;
  readonly runIds: string[];
}

function count(t: Tally, key: string): void {
  t.statuses.set(key, (t.statuses.get(key) ?? 0) + 1);
}

describe("reliability: many clients against low rate limits", () => {
  it(`injects ${CLIENTS} concurrent clients for ${DURATION_MS / 1000} s on /run and /status under low limits: only 200s and the 429s the limits call for, and /health adds up`, async () => {
    await using h = await startHarness({
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
    const seedId = h.enqueue("local", { input: { seed: true } });
    const tally: Tally = { statuses: new Map(), others: [], runAccepted: 0, runIds: [seedId] };
    const headers = { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" };
    try {
      const started = Date.now();
      const client = async (index: number) => {
        const random = seededRandom(index + 1);
        // Bounded in time and in count.
        for (let i = 0; i < 2_000 && Date.now() - started < DURATION_MS; i++) {
          const isRun = random() < 0.5;
          const path = isRun
            ? "/v2/local/run"
            : `/v2/local/status/${tally.runIds[Math.floor(random() * tally.runIds.length)]}`;
          try {
            const res = await request(`${h.url}${path}`, {
              method: isRun ? "POST" : "GET",
              dispatcher: agent,
              headers,
              ...(isRun ? { body: JSON.stringify({ input: { client: index, i } }) } : {}),
            });
            const body = (await res.body.json()) as Record<string, unknown>;
            const route = isRun ? "run" : "status";
            count(tally, `${route} ${res.statusCode}`);
            if (res.statusCode === 200 && isRun) {
              expect(body["status"]).toBe("IN_QUEUE");
              tally.runAccepted++;
              tally.runIds.push(String(body["id"]));
            } else if (res.statusCode === 200) {
              expect(typeof body["status"]).toBe("string");
            } else if (res.statusCode === 429) {
              expect(body["status"]).toBe(429);
              expect(String(body["error"])).toMatch(
                isRun
                  ? /^(rate limit of \/run exceeded: 100 requests per 1000 ms|concurrency limit of \/run exceeded: 20 requests at a time) on this endpoint$/
                  : /^(rate limit of \/status exceeded: 400 requests per 1000 ms|concurrency limit of \/status exceeded: 50 requests at a time) on this endpoint$/,
              );
              expect(Number(res.headers["retry-after"])).toBeGreaterThanOrEqual(1);
            } else {
              tally.others.push(`${route} ${res.statusCode}: ${JSON.stringify(body).slice(0, 200)}`);
            }
          } catch (err) {
            tally.others.push(`${path}: ${(err as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
      const elapsedMs = Date.now() - started;

      expect(tally.others).toEqual([]);
      expect([...tally.statuses.keys()].sort()).toEqual(["run 200", "run 429", "status 200", "status 429"]);
      // Fixed windows start at the first request after the previous one ended: at most this many fit.
      const windows = Math.ceil(elapsedMs / WINDOW_MS) + 1;
      expect(tally.runAccepted).toBeLessThanOrEqual(RUN_PER_WINDOW * windows);
      expect(tally.statuses.get("status 200") ?? 0).toBeLessThanOrEqual(STATUS_PER_WINDOW * windows);

      // Every accepted job (and the seeded one) is accounted for once the worker has run them all.
      const created = tally.runAccepted + 1;
      await waitFor(
        "every accepted job to finish",
        () => h.health("local").jobs.completed === created,
        60_000,
      );
      expect(h.health("local").jobs).toEqual({
        completed: created,
        failed: 0,
        inProgress: 0,
        inQueue: 0,
        retried: 0,
      });
      const health = await request(`${h.url}/v2/local/health`, { headers, dispatcher: agent });
      expect(((await health.body.json()) as { jobs: unknown }).jobs).toEqual(h.health("local").jobs);
    } finally {
      await worker.close();
      await agent.close();
    }
  }, 120_000);
});
