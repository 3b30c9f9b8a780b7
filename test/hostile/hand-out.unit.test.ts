import { describe, expect, it } from "vitest";
import type { Harness } from "../../src/harness/index.js";
import { api, postDone } from "../support/harness-calls.js";
import { inMemoryHarness, sendDashboard } from "../support/inject.js";
import { nested, send } from "../support/raw-http.js";

// The routes in memory (test/support/inject.ts): raw requests go over the harness's connect().

/** A raw request (raw-http.ts) to the harness's API listener, in memory. */
const raw = (h: Harness, options: Omit<Parameters<typeof send>[1], "connect">) =>
  send(h.url, { ...options, connect: () => h.connect() });

const DEPTH_MESSAGE = "request body nests objects and arrays deeper than the limit of 512 levels";

describe("hand-outs that cannot lose a job, and the nesting limit (issue 22, item 3)", () => {
  it("answers /run 400 naming the limit for an input nested 5 000 levels deep, and creates no job", async () => {
    await using h = inMemoryHarness();
    const res = await raw(h, {
      method: "POST",
      path: "/v2/local/run",
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      body: `{"input":${nested(5_000)}}`,
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({ error: DEPTH_MESSAGE, status: 400 });
    expect(h.health("local").jobs.inQueue).toBe(0);
  });

  it("takes an input at the limit, hands it out whole, and the dashboard shows it", async () => {
    await using h = inMemoryHarness({ dashboard: true, takeTimeoutMs: 200 });
    // The body object is level 1, so the input may nest 511 levels.
    const body = `{"input":${nested(511)}}`;
    const run = await raw(h, {
      method: "POST",
      path: "/v2/local/run",
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      body,
    });
    expect(run.status).toBe(200);
    const { id } = JSON.parse(run.text) as { id: string };
    const take = await raw(h, { path: "/v2/local/job-take/w1", headers: { authorization: h.apiKey } });
    expect(take.status).toBe(200);
    expect(take.text).toBe(`{"id":"${id}","input":${nested(511)}}`);
    const detail = await sendDashboard(h, `api/jobs/${id}`, {
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    expect(detail.status).toBe(200);
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
  });

  it("refuses an enqueued input deeper than the limit, or a cycle, with RUNLET_HARNESS_CONFIG", async () => {
    await using h = inMemoryHarness();
    expect(() => h.enqueue("local", { input: JSON.parse(nested(600)) })).toThrow(
      expect.objectContaining({ code: "RUNLET_HARNESS_CONFIG" }),
    );
    const cycle: Record<string, unknown> = {};
    cycle["self"] = cycle;
    expect(() => h.enqueue("local", { input: cycle })).toThrow(/deeper than the limit of 512 levels/);
  });

  it("hands out the rest of a batch and fails, with its own reason, a job whose JSON cannot be written", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const first = h.enqueue("local", { input: { n: 1 } });
    const bad = h.enqueue("local", { input: { n: 2n } });
    const last = h.enqueue("local", { input: { n: 3 } });
    const take = await raw(h, {
      path: "/v2/local/job-take-batch/w1?batch_size=3",
      headers: { authorization: h.apiKey },
    });
    expect(take.status).toBe(200);
    expect((JSON.parse(take.text) as Array<{ id: string }>).map((j) => j.id)).toEqual([first, last]);
    expect(h.job(bad)).toMatchObject({
      status: "FAILED",
      error:
        "the job could not be handed out: its JSON cannot be written (Do not know how to serialize a BigInt)",
    });
    expect(h.job(first)?.status).toBe("IN_PROGRESS");
    expect(h.requests({ route: "job-take-batch" }).map((r) => r.status)).toEqual([200]);
  });

  it("gives a single take the next job when the first cannot be written, and 204 when none can", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const bad = h.enqueue("local", { input: { n: 1n } });
    const good = h.enqueue("local", { input: { n: 1 } });
    const take = await raw(h, { path: "/v2/local/job-take/w1", headers: { authorization: h.apiKey } });
    expect(JSON.parse(take.text)).toEqual({ id: good, input: { n: 1 } });
    expect(h.job(bad)?.status).toBe("FAILED");
    h.enqueue("local", { input: { n: 2n } });
    const none = await raw(h, { path: "/v2/local/job-take/w2", headers: { authorization: h.apiKey } });
    expect(none.status).toBe(204);
    expect(h.requests({ route: "job-take" }).map((r) => r.status)).toEqual([200, 204]);
  });

  it("answers a job-done whose output nests deeper than the limit 400 naming it, and the job runs on", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 200 });
    const id = h.enqueue("local", { input: {} });
    await raw(h, { path: "/v2/local/job-take/w1", headers: { authorization: h.apiKey } });
    const res = await raw(h, {
      method: "POST",
      path: `/v2/local/job-done/w1/${id}`,
      headers: { authorization: h.apiKey, "content-type": "application/json" },
      body: `{"output":${nested(5_000)}}`,
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({
      error: "job-done body nests objects and arrays deeper than the limit of 512 levels",
      status: 400,
    });
    expect(h.job(id)?.status).toBe("IN_PROGRESS");
    expect(await postDone(h, id, { output: "ok" })).toBe(200);
    expect((await api(h, "GET", `/v2/local/status/${id}`)).body).toMatchObject({
      status: "COMPLETED",
      output: "ok",
    });
  });
});
