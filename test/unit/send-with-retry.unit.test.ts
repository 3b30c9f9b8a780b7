import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/clock.js";
import { type AttemptOutcome, nextRetry, retryPolicy } from "../../src/retry-policy.js";
import { type AttemptResult, type RetryNotice, sendWithRetry } from "../../src/send-with-retry.js";

/**
 * The one retry loop on its own, with attempts the test scripts (the three senders that use it —
 * the worker's outbox, the job client, the management client — are tested over loopback in
 * test/worker/outbox.unit.test.ts, test/client and test/management). Waits run on a ManualClock.
 */

const policy = retryPolicy({
  statuses: new Set([503]),
  refusedStatuses: new Set(),
  allServerErrors: false,
  errorCodes: new Set(["ECONNRESET"]),
  baseMs: 100,
  capMs: 1_000,
  jitter: 0,
  longRetryAfter: "cap",
  maxRetryAfterMs: 1_000,
  maxRetries: 3,
});

/** Attempts that end as `script` says, in order; the last entry repeats. */
function scripted(script: Array<"ok" | 503 | 400 | "reset">) {
  const made: number[] = [];
  const attempt = async (n: number): Promise<AttemptResult<string>> => {
    made.push(n);
    const step = script[Math.min(n, script.length - 1)]!;
    if (step === "ok") return { done: `ok after ${n}` };
    const failed: AttemptOutcome =
      step === "reset"
        ? { error: Object.assign(new Error("reset"), { code: "ECONNRESET" }) }
        : { status: step };
    return { failed, otherwise: () => `stopped at ${n} (${step})` };
  };
  return { made, attempt };
}

/** Lets the loop run up to its next wait (or its end). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("sendWithRetry", () => {
  it("waits the decision's delay on the clock between attempts, telling onRetry first, until one is done", async () => {
    const clock = new ManualClock();
    const { made, attempt } = scripted([503, "reset", "ok"]);
    const notices: RetryNotice[] = [];
    const sending = sendWithRetry({
      attempt,
      retry: (n, failed) => nextRetry(policy, n, failed),
      onRetry: (notice) => notices.push(notice),
      clock,
    });
    await settle();
    expect(made).toEqual([0]);
    expect(notices).toEqual([{ attempt: 0, delayMs: 100, failed: { status: 503 } }]);
    clock.advance(99);
    await settle();
    expect(made).toEqual([0]);
    clock.advance(1);
    await settle();
    expect(made).toEqual([0, 1]);
    expect(notices.map((n) => [n.attempt, n.delayMs])).toEqual([
      [0, 100],
      [1, 200],
    ]);
    clock.advance(200);
    expect(await sending).toBe("ok after 2");
    expect(clock.pendingTimers).toBe(0);
  });

  it("ends with the failed attempt's own value when the decision says stop: not retryable, or attempts used up", async () => {
    const clock = new ManualClock();
    const refused = scripted([400]);
    expect(
      await sendWithRetry({ attempt: refused.attempt, retry: (n, f) => nextRetry(policy, n, f), clock }),
    ).toBe("stopped at 0 (400)");
    expect(refused.made).toEqual([0]);

    const busy = scripted([503]);
    const sending = sendWithRetry({ attempt: busy.attempt, retry: (n, f) => nextRetry(policy, n, f), clock });
    for (const ms of [100, 200, 400]) {
      await settle();
      clock.advance(ms);
    }
    // maxRetries 3: four attempts, then the fourth's value.
    expect(await sending).toBe("stopped at 3 (503)");
    expect(busy.made).toEqual([0, 1, 2, 3]);
  });

  it("ends a wait at once when its signal aborts, with `aborted`'s value, and leaves no timer or listener", async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const { made, attempt } = scripted([503]);
    const sending = sendWithRetry({
      attempt,
      retry: (n, f) => nextRetry(policy, n, f),
      signal: controller.signal,
      aborted: () => "given up",
      clock,
    });
    await settle();
    expect(clock.pendingTimers).toBe(1);
    controller.abort(new Error("closing"));
    expect(await sending).toBe("given up");
    expect(made).toEqual([0]);
    expect(clock.pendingTimers).toBe(0);
    expect(getEventListeners(controller.signal, "abort")).toEqual([]);
  });

  it("throws the signal's reason without `aborted`, and makes no attempt once the signal has aborted", async () => {
    const reason = new Error("caller gave up");
    const { made, attempt } = scripted(["ok"]);
    await expect(
      sendWithRetry({ attempt, retry: (n, f) => nextRetry(policy, n, f), signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
    expect(made).toEqual([]);
  });

  it("lets a throw in an attempt or in `otherwise` end the send as it is", async () => {
    const boom = new Error("bad body");
    await expect(
      sendWithRetry({
        attempt: async () => {
          throw boom;
        },
        retry: () => ({ retry: true, delayMs: 0 }),
      }),
    ).rejects.toBe(boom);
    await expect(
      sendWithRetry<string>({
        attempt: async () => ({
          failed: { status: 400 },
          otherwise: () => {
            throw boom;
          },
        }),
        retry: (n, f) => nextRetry(policy, n, f),
      }),
    ).rejects.toBe(boom);
  });
});
