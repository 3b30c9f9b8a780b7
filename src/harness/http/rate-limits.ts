import type { ServerResponse } from "node:http";
import {
  RATE_LIMIT_WINDOW_MS,
  RATE_LIMITS,
  type RateLimitRule,
  type RateOperation,
} from "../../protocol/limits.js";
import type { Clock } from "../clock.js";
import type { Refusal } from "./route-table.js";

/** Rate-limit settings (docs/protocol.md, "Rate limits"); tests shrink them. */
export interface RateLimitOptions {
  /** Rules per operation (`run`, `runsync`, `status`, `stream`, `cancel`, `purge-queue`, `openai`), merged over the platform's. */
  readonly rules?: Readonly<Record<string, RateLimitRule>>;
  /** The rate window, ms. @default 10000 */
  readonly windowMs?: number;
  /** Dynamic rule: each connected worker raises the rate to at least workers × this, per window. @default 10 */
  readonly requestsPerWorker?: number;
  /** Dynamic rule: each connected worker raises concurrency to at least workers × this. @default 2 */
  readonly concurrentPerWorker?: number;
  /** Turns rate limiting off. @default false */
  readonly disabled?: boolean;
}

/** The outcome of asking for a slot. */
export type RateDecision =
  | { readonly ok: true; release(): void }
  | { readonly ok: false; readonly retryAfterSec: number; readonly message: string };

/** One operation's rate-limit state on one endpoint, as the dashboard shows it. */
export interface RateState {
  readonly operation: string;
  /** Requests counted in the current window (0 once the window has passed). */
  readonly used: number;
  /** The effective per-window limit (the dynamic rule applied). */
  readonly perWindow: number;
  /** Requests in flight now. */
  readonly inFlight: number;
  /** The effective concurrency limit, or null where none applies. */
  readonly concurrent: number | null;
}

interface Counter {
  windowStart: number;
  count: number;
  inFlight: number;
}

/**
 * Per endpoint and operation: a fixed window of `windowMs` counting requests, and a count of
 * requests in flight. The effective limits follow the platform's dynamic rule,
 * `max(base, connected workers × per-worker allowance)`.
 */
export class RateLimiter {
  readonly #clock: Clock;
  readonly #rules: Readonly<Record<string, RateLimitRule>>;
  readonly #windowMs: number;
  readonly #perWorker: number;
  readonly #concurrentPerWorker: number;
  readonly #disabled: boolean;
  readonly #counters = new Map<string, Counter>();

  constructor(options: RateLimitOptions, clock: Clock) {
    this.#clock = clock;
    this.#rules = { ...RATE_LIMITS, ...options.rules };
    this.#windowMs = options.windowMs ?? RATE_LIMIT_WINDOW_MS;
    this.#perWorker = options.requestsPerWorker ?? 10;
    this.#concurrentPerWorker = options.concurrentPerWorker ?? 2;
    this.#disabled = options.disabled ?? false;
  }

  /** Every limited operation's state on `endpointId`; empty when rate limiting is off. */
  state(endpointId: string, connectedWorkers: number): RateState[] {
    if (this.#disabled) return [];
    const now = this.#clock.now();
    return Object.entries(this.#rules).map(([operation, rule]) => {
      const counter = this.#counters.get(`${endpointId}\u0000${operation}`);
      const current = counter !== undefined && now - counter.windowStart < this.#windowMs;
      return {
        operation,
        used: current ? counter.count : 0,
        perWindow: Math.max(rule.perWindow, connectedWorkers * this.#perWorker),
        inFlight: counter?.inFlight ?? 0,
        concurrent:
          rule.concurrent === null
            ? null
            : Math.max(rule.concurrent, connectedWorkers * this.#concurrentPerWorker),
      };
    });
  }

  /** Takes a slot for one request of `operation` on `endpointId`; release it when the answer is sent. */
  acquire(endpointId: string, operation: string, connectedWorkers: number): RateDecision {
    const rule = this.#rules[operation];
    if (this.#disabled || rule === undefined) return { ok: true, release: () => {} };
    const key = `${endpointId}\u0000${operation}`;
    const now = this.#clock.now();
    let counter = this.#counters.get(key);
    if (counter === undefined) {
      counter = { windowStart: now, count: 0, inFlight: 0 };
      this.#counters.set(key, counter);
    }
    if (now - counter.windowStart >= this.#windowMs) {
      counter.windowStart = now;
      counter.count = 0;
    }
    const perWindow = Math.max(rule.perWindow, connectedWorkers * this.#perWorker);
    if (counter.count >= perWindow) {
      const leftMs = counter.windowStart + this.#windowMs - now;
      return {
        ok: false,
        retryAfterSec: Math.max(1, Math.ceil(leftMs / 1000)),
        message: `rate limit of /${operation} exceeded: ${perWindow} requests per ${this.#windowMs} ms on this endpoint`,
      };
    }
    if (rule.concurrent !== null) {
      const concurrent = Math.max(rule.concurrent, connectedWorkers * this.#concurrentPerWorker);
      if (counter.inFlight >= concurrent) {
        return {
          ok: false,
          retryAfterSec: 1,
          message: `concurrency limit of /${operation} exceeded: ${concurrent} requests at a time on this endpoint`,
        };
      }
    }
    counter.count++;
    counter.inFlight++;
    const c = counter;
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        c.inFlight--;
      },
    };
  }
}

/**
 * The admission step of the families whose routes have rate-limit rows (client, OpenAI): takes a
 * slot of the row on the call's endpoint, freed when the answer is done, or refuses with 429 and
 * `Retry-After`. `connected` counts the endpoint's connected workers (the dynamic rule).
 */
export function rateAdmission(
  limiter: RateLimiter,
  connected: (endpointId: string) => number,
): (
  call: { readonly endpointId: string; readonly res: ServerResponse },
  operation: RateOperation,
) => Refusal | undefined {
  return (call, operation) => {
    const slot = limiter.acquire(call.endpointId, operation, connected(call.endpointId));
    if (!slot.ok) {
      return {
        reason: "rate",
        status: 429,
        message: slot.message,
        headers: { "retry-after": String(slot.retryAfterSec) },
      };
    }
    call.res.once("close", slot.release);
    return undefined;
  };
}
