import { describe, expect, it } from "vitest";
import { retryAfterMs, sleep } from "../../src/wait.js";

describe("retryAfterMs", () => {
  it("reads delta-seconds and HTTP dates, and caps when asked", () => {
    expect(retryAfterMs("5")).toBe(5_000);
    expect(retryAfterMs(" 1.5 ")).toBe(1_500);
    expect(retryAfterMs(["2", "9"])).toBe(2_000);
    const now = Date.parse("Sat, 21 Nov 2026 10:00:00 GMT");
    expect(retryAfterMs("Sat, 21 Nov 2026 10:00:30 GMT", { nowMs: now })).toBe(30_000);
    expect(retryAfterMs("Sat, 21 Nov 2026 09:00:00 GMT", { nowMs: now })).toBe(0);
    expect(retryAfterMs("600", { capMs: 60_000 })).toBe(60_000);
  });

  it("is undefined when the header is absent or unreadable", () => {
    expect(retryAfterMs(undefined)).toBeUndefined();
    expect(retryAfterMs("")).toBeUndefined();
    expect(retryAfterMs("soon")).toBeUndefined();
    expect(retryAfterMs("-3")).toBeUndefined();
  });
});

describe("sleep", () => {
  it("resolves true after the full time and false at once when aborted", async () => {
    expect(await sleep(1)).toBe(true);
    const controller = new AbortController();
    const waiting = sleep(60_000, controller.signal);
    controller.abort();
    expect(await waiting).toBe(false);
    expect(await sleep(60_000, AbortSignal.abort())).toBe(false);
  });
});
