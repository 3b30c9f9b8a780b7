import { describe, expect, it } from "vitest";
import { z } from "zod";
import { inputJsonSchema } from "../../src/harness/dashboard/index.js";
import { describeHandler, ManualClock, startHarness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";

/** Reads server-sent events from a dashboard feed until `until` says stop; returns them in order. */
async function readEvents(
  res: Response,
  until: (events: Array<{ type: string; data: unknown }>) => boolean,
): Promise<Array<{ type: string; data: unknown }>> {
  const events: Array<{ type: string; data: unknown }> = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    while (!until(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const type = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (type !== undefined && data !== undefined) events.push({ type, data: JSON.parse(data) });
      }
    }
  } finally {
    await reader.cancel();
  }
  return events;
}

describe("the dashboard's listener", () => {
  it("is off unless asked for, and closes with the harness", async () => {
    await using plain = await startHarness();
    expect(plain.dashboardUrl).toBeUndefined();
    const h = await startHarness({ dashboard: true });
    const url = h.dashboardUrl!;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/_runlet\/$/);
    expect(new URL(url).port).not.toBe(new URL(h.url).port);
    await h.close();
    await expect(fetch(url)).rejects.toThrow();
  });

  it("serves the page without the key, under a Content-Security-Policy that allows only its own files", async () => {
    await using h = await startHarness({ dashboard: true });
    const page = await fetch(h.dashboardUrl!);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const html = await page.text();
    expect(html).toContain('<script type="module" src="app.js"></script>');
    // No inline script or style, and nothing from another origin.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/);
    expect(html.match(/\s(?:src|href)="[^"]*"/g)).toEqual([
      ' href="data:,"',
      ' href="style.css"',
      ' src="app.js"',
    ]);
    const script = await fetch(`${h.dashboardUrl}app.js`);
    expect([script.status, script.headers.get("content-type")]).toEqual([
      200,
      "text/javascript; charset=utf-8",
    ]);
    expect((await fetch(`${h.dashboardUrl}style.css`)).status).toBe(200);
    expect((await fetch(`${h.dashboardUrl}../package.json`)).status).toBe(404);
    expect((await fetch(`${h.dashboardUrl}nope.js`)).status).toBe(404);
    const root = await fetch(new URL("/", h.dashboardUrl), { redirect: "manual" });
    expect([root.status, root.headers.get("location")]).toEqual([302, "/_runlet/"]);
  });

  it("answers 401 with no data to every data route and the feed without the main key", async () => {
    await using h = await startHarness({
      dashboard: true,
      apiKey: "main-key",
      keys: [{ key: "scoped", endpoints: ["local"] }],
    });
    const id = h.enqueue("local", { input: { secret: "s3cr3t" } });
    for (const [method, path] of [
      ["GET", "api/state"],
      ["GET", "api/events"],
      ["GET", `api/jobs/${id}`],
      ["POST", `api/jobs/${id}/cancel`],
      ["POST", "api/jobs"],
    ] as const) {
      for (const authorization of [undefined, "Bearer wrong", "main-key", "Bearer scoped"]) {
        const res = await fetch(`${h.dashboardUrl}${path}`, {
          method,
          headers: authorization === undefined ? {} : { authorization },
        });
        const text = await res.text();
        expect({ path, authorization, status: res.status, body: JSON.parse(text) }).toEqual({
          path,
          authorization,
          status: 401,
          body: {
            error: "missing or wrong API key: the dashboard needs the harness's main key",
            status: 401,
          },
        });
      }
    }
    expect(h.job(id)?.status).toBe("IN_QUEUE");
  });

  it("gives a job's details with s3Config secrets masked, and cancels and retries it", async () => {
    await using h = await startHarness({ dashboard: true });
    const auth = { authorization: `Bearer ${h.apiKey}` };
    const id = h.enqueue("local", {
      input: { n: 1 },
      s3Config: { accessId: "AKIA", accessSecret: "hidden", bucketName: "b", endpointUrl: "http://s3" },
    });
    const detail = await (await fetch(`${h.dashboardUrl}api/jobs/${id}`, { headers: auth })).json();
    expect(detail).toEqual({
      id,
      endpointId: "local",
      kind: "run",
      status: "IN_QUEUE",
      createdAt: expect.any(String),
      request: {
        id,
        input: { n: 1 },
        s3Config: {
          accessId: "[redacted]",
          accessSecret: "[redacted]",
          bucketName: "b",
          endpointUrl: "http://s3",
        },
      },
      progress: [],
      stream: [],
      timeline: [{ name: "queue", start: expect.any(Number), attributes: {} }],
      webhookAttempts: [],
      lapses: 0,
    });
    const cancelled = await fetch(`${h.dashboardUrl}api/jobs/${id}/cancel`, {
      method: "POST",
      headers: auth,
    });
    expect(((await cancelled.json()) as { status: string }).status).toBe("CANCELLED");
    const retry = await fetch(`${h.dashboardUrl}api/jobs/${id}/retry`, { method: "POST", headers: auth });
    expect([retry.status, await retry.json()]).toEqual([
      400,
      { error: `job "${id}" is CANCELLED: only FAILED or TIMED_OUT jobs can be retried`, status: 400 },
    ]);
    const missing = await fetch(`${h.dashboardUrl}api/jobs/nope`, { headers: auth });
    expect(missing.status).toBe(404);
    expect((await fetch(`${h.dashboardUrl}api/jobs/%E0%A4%A`, { headers: auth })).status).toBe(400);
    expect(
      (await fetch(`${h.dashboardUrl}api/jobs/${id}/cancel/more`, { method: "POST", headers: auth })).status,
    ).toBe(404);
  });

  it("creates jobs as /run and /runsync would, refusing a bad body with the API's message", async () => {
    await using h = await startHarness({ dashboard: true });
    const post = (body: unknown) =>
      fetch(`${h.dashboardUrl}api/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const run = (await (
      await post({ endpointId: "local", route: "run", body: { input: { a: 1 } } })
    ).json()) as {
      id: string;
    };
    expect(run).toEqual({ id: expect.stringMatching(/-e1$/), status: "IN_QUEUE" });
    expect(h.job(run.id)).toMatchObject({ kind: "run", input: { a: 1 } });
    const sync = (await (
      await post({ endpointId: "local", route: "runsync", body: { input: {} } })
    ).json()) as {
      id: string;
    };
    expect(sync.id).toMatch(/^sync-/);
    const bad = await post({ endpointId: "local", route: "run", body: { input: "text" } });
    expect([bad.status, await bad.json()]).toEqual([
      400,
      {
        error: "invalid request body: input must be a JSON object",
        status: 400,
        issues: ["input must be a JSON object"],
      },
    ]);
    expect((await post({ endpointId: "nope", route: "run", body: { input: {} } })).status).toBe(404);
    expect((await post({ endpointId: "local", route: "stream", body: { input: {} } })).status).toBe(400);
  });

  it("feeds a snapshot, then each job change and the endpoint's counts as they happen", async () => {
    await using h = await startHarness({ dashboard: { sampleRequest: { input: { prompt: "hi" } } } });
    const before = h.enqueue("local", { input: {} });
    const res = await fetch(`${h.dashboardUrl}api/events`, {
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    let created = "";
    const events = await readEvents(res, (seen) => {
      if (seen.length === 1) {
        // The snapshot is in: now change things.
        created = h.enqueue("local", { input: {}, policy: { lowPriority: true } });
        h.stopJob(before);
      }
      return seen.filter((e) => e.type === "endpoint").length >= 1 && seen.length >= 4;
    });
    expect(events[0]).toEqual({
      type: "snapshot",
      data: {
        endpoints: [
          {
            id: "local",
            queue: { normal: 1, low: 0 },
            inProgress: 0,
            ended: { COMPLETED: 0, FAILED: 0, CANCELLED: 0, TIMED_OUT: 0 },
            rateLimits: expect.any(Array),
            restarts: 0,
          },
        ],
        workers: [],
        jobs: [
          { id: before, endpointId: "local", kind: "run", status: "IN_QUEUE", createdAt: expect.any(String) },
        ],
        sampleRequest: { input: { prompt: "hi" } },
        handlers: {},
      },
    });
    expect(events.slice(1).map((e) => [e.type, (e.data as { id?: string; status?: string }).status])).toEqual(
      [
        ["job", "IN_QUEUE"],
        ["job", "CANCELLED"],
        ["endpoint", undefined],
      ],
    );
    expect((events[1]!.data as { id: string }).id).toBe(created);
    expect(events[3]!.data).toMatchObject({
      endpoint: { queue: { normal: 0, low: 1 }, ended: { CANCELLED: 1 } },
      workers: [],
    });
  });

  it("carries each endpoint's handler description in the snapshot, and a job's handler metrics in its detail", async () => {
    await using h = await startHarness({ dashboard: true });
    const handler = defineHandler({
      input: z.object({ prompt: z.string(), steps: z.number().int().max(50).default(4) }),
      handler: ({ input }) => input.prompt,
    });
    h.describeEndpoint("local", describeHandler(handler));
    const id = h.enqueue("local", { input: { prompt: "x" } });
    h.reportJobMetrics(id, { tokens: 12, model: "tiny" });
    const get = async (path: string) =>
      (await (
        await fetch(`${h.dashboardUrl}api/${path}`, { headers: { authorization: `Bearer ${h.apiKey}` } })
      ).json()) as Record<string, unknown>;
    expect((await get("state"))["handlers"]).toEqual({
      local: {
        inputSchema: {
          type: "object",
          properties: {
            prompt: { type: "string" },
            steps: { default: 4, type: "integer", minimum: -9007199254740991, maximum: 50 },
          },
          required: ["prompt"],
        },
        streaming: false,
        openai: false,
      },
    });
    expect((await get(`jobs/${id}`))["metrics"]).toEqual({ tokens: 12, model: "tiny" });
  });

  it("describes a schema zod cannot fully express with a note, and one it cannot express at all as {}", () => {
    const partial = inputJsonSchema(z.object({ when: z.date(), name: z.string() }));
    expect(partial.inputSchema).toEqual({
      type: "object",
      properties: { when: {}, name: { type: "string" } },
      required: ["when", "name"],
    });
    expect(partial.schemaNote).toMatch(
      /^part of the input schema has no JSON Schema form and accepts anything here \(Date cannot be represented in JSON Schema\)/,
    );
    const custom = inputJsonSchema(z.custom<string>((v) => typeof v === "string"));
    expect(custom.inputSchema).toEqual({});
    expect(describeHandler(defineHandler({ async *handler() {} })).streaming).toBe(true);
    const huge = inputJsonSchema(
      z.object(
        Object.fromEntries(
          Array.from({ length: 3_000 }, (_, i) => [`field_${i}`, z.string().describe("x".repeat(20))]),
        ),
      ),
    );
    expect(huge).toEqual({
      inputSchema: {},
      schemaNote: expect.stringMatching(
        /^the input schema is \d+ bytes as JSON Schema, over the page's 65536/,
      ),
    });
  });

  it("feeds a worker's pings and its lapse, and keeps a lapsed worker on the list", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    await using h = await startHarness({ dashboard: true, clock, heartbeatTimeoutMs: 10_000 });
    const res = await fetch(`${h.dashboardUrl}api/events`, {
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    const ping = () =>
      fetch(`${h.url}/v2/local/ping/w1?job_id=&runpod_version=test`, {
        headers: { authorization: h.apiKey },
      });
    const events = await readEvents(res, (seen) => {
      const endpoints = seen.filter((e) => e.type === "endpoint").length;
      if (seen.length === 1) void ping().then((r) => r.text());
      if (endpoints === 1 && seen.length === 2) clock.advance(10_000);
      return endpoints === 2;
    });
    const workers = events
      .filter((e) => e.type === "endpoint")
      .map((e) => (e.data as { workers: unknown }).workers);
    expect(workers).toEqual([
      [
        {
          id: "w1",
          endpointId: "local",
          state: "connected",
          lastPingAt: "2026-01-01T00:00:00.000Z",
          jobs: [],
        },
      ],
      [{ id: "w1", endpointId: "local", state: "lapsed", lastPingAt: "2026-01-01T00:00:00.000Z", jobs: [] }],
    ]);
  });

  it("tells the page when a job is deleted (a purge here), so it leaves the list", async () => {
    await using h = await startHarness({ dashboard: true });
    const id = h.enqueue("local", { input: {} });
    const res = await fetch(`${h.dashboardUrl}api/events`, {
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    const events = await readEvents(res, (seen) => {
      if (seen.length === 1) {
        void fetch(`${h.url}/v2/local/purge-queue`, {
          method: "POST",
          headers: { authorization: `Bearer ${h.apiKey}` },
          body: "{}",
        }).then((r) => r.text());
      }
      return seen.some((e) => e.type === "job");
    });
    expect(events.find((e) => e.type === "job")?.data).toEqual({
      id,
      endpointId: "local",
      kind: "run",
      status: "IN_QUEUE",
      createdAt: expect.any(String),
      deleted: true,
    });
  });
});
