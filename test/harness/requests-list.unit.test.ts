import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/harness/index.js";
import { jobListSchema } from "../../src/protocol/api.js";
import { api, postDone, takeJob } from "../support/harness-calls.js";
import { inMemoryHarness } from "../support/inject.js";

describe("GET /v2/<endpoint>/requests", () => {
  it("lists the endpoint's jobs newest first with status and times, never input or output", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    await using h = inMemoryHarness({ clock, endpoints: [{ id: "local" }, { id: "other" }] });
    const first = h.enqueue("local", { input: { secret: "in" } });
    clock.advance(1_000);
    const second = h.enqueue("local", { input: { n: 2 } });
    h.enqueue("other", { input: {} });
    clock.advance(500);
    const taken = await takeJob(h, "local", "w1");
    expect(taken?.id).toBe(first);
    clock.advance(250);
    expect(await postDone(h, first, { output: { secret: "out" } })).toBe(200);

    const res = await api(h, "GET", "/v2/local/requests");
    expect(res.status).toBe(200);
    expect(jobListSchema.parse(res.body)).toEqual(res.body);
    expect(res.body).toEqual({
      requests: [
        { id: second, status: "IN_QUEUE", createdAt: "2026-01-01T00:00:01.000Z" },
        {
          id: first,
          status: "COMPLETED",
          createdAt: "2026-01-01T00:00:00.000Z",
          startedAt: "2026-01-01T00:00:01.500Z",
          finishedAt: "2026-01-01T00:00:01.750Z",
          delayTime: 1_500,
          executionTime: 250,
          workerId: "w1",
        },
      ],
    });
    expect(JSON.stringify(res.body)).not.toContain("secret");
  });

  it("filters by ?status= and refuses an unknown status with 400 naming the choices", async () => {
    await using h = inMemoryHarness();
    const a = h.enqueue("local", { input: {} });
    const b = h.enqueue("local", { input: {} });
    h.stopJob(a);
    expect((await api(h, "GET", "/v2/local/requests?status=CANCELLED")).body).toEqual({
      requests: [expect.objectContaining({ id: a, status: "CANCELLED" })],
    });
    expect((await api(h, "GET", "/v2/local/requests?status=IN_QUEUE")).body).toEqual({
      requests: [{ id: b, status: "IN_QUEUE", createdAt: expect.any(String) }],
    });
    expect(await api(h, "GET", "/v2/local/requests?status=done")).toMatchObject({
      status: 400,
      body: {
        error:
          'status must be one of IN_QUEUE, IN_PROGRESS, COMPLETED, FAILED, CANCELLED, TIMED_OUT, got "done"',
        status: 400,
      },
    });
  });

  it("needs the API key, takes GET only, and has the platform's limit of 10 per window", async () => {
    await using h = inMemoryHarness();
    expect((await api(h, "GET", "/v2/local/requests", undefined, { key: null })).status).toBe(401);
    expect(await api(h, "POST", "/v2/local/requests")).toMatchObject({
      status: 405,
      body: { error: "/requests takes GET, got POST", status: 405 },
    });
    // The POST above was refused before the limiter, so ten GETs fit in the window and the 11th does not.
    for (let i = 0; i < 10; i++) expect((await api(h, "GET", "/v2/local/requests")).status).toBe(200);
    const over = await api(h, "GET", "/v2/local/requests");
    expect(over).toMatchObject({
      status: 429,
      body: {
        error: "rate limit of /requests exceeded: 10 requests per 10000 ms on this endpoint",
        status: 429,
      },
    });
    expect(over.headers.get("retry-after")).toMatch(/^\d+$/);
  });
});
