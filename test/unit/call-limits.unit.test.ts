import { describe, expect, it } from "vitest";
import { callLimitsResolver } from "../../src/call-limits.js";
import { createClient } from "../../src/client/index.js";
import { createManagementClient } from "../../src/management/index.js";

/**
 * The timeout and retry options both API clients take, resolved by one function
 * (src/call-limits.ts): defaults per client, one message per bad value, named as the client
 * names the option.
 */

describe("callLimitsResolver", () => {
  const limitsOf = callLimitsResolver({
    timeoutName: "timeoutMs",
    timeoutMs: 30_000,
    maxRetries: 4,
    retryBaseMs: 500,
    retryCapMs: 30_000,
  });

  it("fills in the client's defaults and keeps what is given", () => {
    expect(limitsOf({})).toEqual({ timeoutMs: 30_000, retry: { maxRetries: 4, baseMs: 500, capMs: 30_000 } });
    expect(limitsOf({ timeoutMs: 5, maxRetries: 0, retryBaseMs: 0, retryCapMs: 7 })).toEqual({
      timeoutMs: 5,
      retry: { maxRetries: 0, baseMs: 0, capMs: 7 },
    });
    expect(Object.isFrozen(limitsOf({}).retry)).toBe(true);
  });

  it("names every bad option, what was expected and what came", () => {
    expect(() => limitsOf({ timeoutMs: 0, retryCapMs: 1.5 })).toThrow(
      expect.objectContaining({
        code: "RUNLET_CONFIG_INVALID",
        message: expect.stringMatching(
          /timeoutMs must be an integer ≥ 1, got 0.*retryCapMs must be an integer ≥ 0, got 1\.5/,
        ),
      }),
    );
  });
});

describe("the two API clients", () => {
  it("refuse the same bad retry option with the same message, and each names its own timeout option", () => {
    const job = () => createClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1", maxRetries: -1 });
    const management = () =>
      createManagementClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1", maxRetries: -1 });
    expect(job).toThrow("maxRetries must be an integer ≥ 0, got -1");
    expect(management).toThrow("maxRetries must be an integer ≥ 0, got -1");
    expect(() => createClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1", requestTimeoutMs: 0 })).toThrow(
      "requestTimeoutMs must be an integer ≥ 1, got 0",
    );
    expect(() =>
      createManagementClient({ apiKey: "k", baseUrl: "http://127.0.0.1:1", timeoutMs: 0 }),
    ).toThrow("timeoutMs must be an integer ≥ 1, got 0");
  });
});
