import { describe, expect, it } from "vitest";
import { backoffMs, errorCodeOf, nextRetry, type RetryPolicy, retryPolicy } from "../../src/retry-policy.js";

const policy: RetryPolicy = retryPolicy({
  statuses: new Set([429, 503]),
  refusedStatuses: new Set([429]),
  allServerErrors: false,
  errorCodes: new Set(["ECONNRESET"]),
  baseMs: 100,
  capMs: 1_000,
  jitter: 0.5,
  longRetryAfter: "cap",
  maxRetryAfterMs: 2_000,
  maxRetries: 3,
});

describe("RetryPolicy", () => {
  it("bounds the back-off by base·2^attempt and the cap, with the policy's share of jitter", () => {
    expect([0, 1, 2, 3, 4, 40].map((a) => backoffMs(policy, a, () => 0))).toEqual([
      100, 200, 400, 800, 1_000, 1_000,
    ]);
    expect([0, 1, 4].map((a) => backoffMs(policy, a, () => 0.999_999))).toEqual([50, 100, 500]);
    expect(backoffMs(retryPolicy(policy, { jitter: 1 }), 2, () => 0.75)).toBe(100);
  });

  it("retries listed statuses and network codes (also on a cause), and nothing else", () => {
    const r = () => 0;
    expect(nextRetry(policy, 0, { status: 503 }, { random: r })).toEqual({ retry: true, delayMs: 100 });
    expect(nextRetry(policy, 0, { status: 500 })).toEqual({ retry: false, reason: "not-retryable" });
    expect(
      nextRetry(retryPolicy(policy, { allServerErrors: true }), 1, { status: 500 }, { random: r }),
    ).toEqual({
      retry: true,
      delayMs: 200,
    });
    const reset = new Error("fetch failed", {
      cause: Object.assign(new Error("reset"), { code: "ECONNRESET" }),
    });
    expect(errorCodeOf(reset)).toBe("ECONNRESET");
    expect(nextRetry(policy, 0, { error: reset }, { random: r })).toEqual({ retry: true, delayMs: 100 });
    expect(nextRetry(policy, 0, { error: new Error("boom") })).toEqual({
      retry: false,
      reason: "not-retryable",
    });
    expect(
      nextRetry(retryPolicy(policy, { errorCodes: new Set(["*"]) }), 0, { error: 1 }, { random: r }),
    ).toEqual({
      retry: true,
      delayMs: 100,
    });
  });

  it("stops after maxRetries", () => {
    expect(nextRetry(policy, 2, { status: 429 }, { random: () => 0 })).toEqual({ retry: true, delayMs: 400 });
    expect(nextRetry(policy, 3, { status: 429 })).toEqual({ retry: false, reason: "exhausted" });
  });

  it("repeats a request that is not safe to repeat only after a refusal", () => {
    expect(nextRetry(policy, 0, { status: 503 }, { retryable: false })).toEqual({
      retry: false,
      reason: "not-safe",
    });
    expect(nextRetry(policy, 0, { status: 429 }, { retryable: false })).toEqual({
      retry: false,
      reason: "not-safe",
    });
    expect(nextRetry(policy, 0, { status: 503 }, { retryable: "when-refused" })).toEqual({
      retry: false,
      reason: "not-safe",
    });
    const reset = Object.assign(new Error("reset"), { code: "ECONNRESET" });
    expect(nextRetry(policy, 0, { error: reset }, { retryable: "when-refused" })).toEqual({
      retry: false,
      reason: "not-safe",
    });
    expect(nextRetry(policy, 0, { status: 429 }, { retryable: "when-refused", random: () => 0 })).toEqual({
      retry: true,
      delayMs: 100,
    });
  });

  it("honours Retry-After (seconds or a date), capping or giving up on a long one as the policy says", () => {
    const headers = (v: string) => ({ status: 429, headers: { "retry-after": v } });
    expect(nextRetry(policy, 0, headers("1.5"))).toEqual({ retry: true, delayMs: 1_500 });
    expect(nextRetry(policy, 0, headers("60"))).toEqual({ retry: true, delayMs: 2_000 });
    const giveUp = retryPolicy(policy, { longRetryAfter: "give-up" });
    expect(nextRetry(giveUp, 0, headers("60"))).toEqual({ retry: false, reason: "retry-after-too-long" });
    const nowMs = Date.parse("2026-01-01T00:00:00Z");
    expect(nextRetry(policy, 0, headers("Thu, 01 Jan 2026 00:00:01 GMT"), { nowMs })).toEqual({
      retry: true,
      delayMs: 1_000,
    });
    expect(nextRetry(policy, 0, headers("soon"), { random: () => 0 })).toEqual({ retry: true, delayMs: 100 });
  });
});
