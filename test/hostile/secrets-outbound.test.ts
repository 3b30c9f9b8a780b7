import { describe, expect, it } from "vitest";
import { defineHandler, JobError, WorkerUnfitError } from "../../src/index.js";
import { defineOpenAIHandler } from "../../src/openai/index.js";
import { send } from "../support/inject.js";
import { call, post, startLbWorker } from "../support/lb-support.js";
import { startReceiver } from "../support/otlp-receiver.js";
import { waitForAsync } from "../support/wait-for.js";
import { logSink, memoryHarness, testHarness, waitFor, workerFor } from "../support/workers.js";

/**
 * Issue 51, item 4: what leaves the worker for the platform goes through the log's redaction. A
 * handler plants each kind of secret (the worker's API key, a URL's password, a token's value in a
 * URL, the job's s3Config keys) in everything it can make the worker send: a thrown error (report
 * and traceback), a JobError's plain message, a stream that fails after an item, and an unfit
 * reason (the unhealthy ping). Then every record the harness keeps from the worker is searched.
 */

const URL_PASSWORD = "hunter2-url-password";
const TOKEN = "tok-9f8e7d6c5b4a";
const ACCESS_ID = "AKIAPLANTEDKEYID01";
const ACCESS_SECRET = "planted/s3+secret=value";

describe("secrets never reach the platform (issue 51, item 4)", () => {
  it("finds no planted secret in pings, job results, stream items or the request log", async () => {
    // On loopback: the unfit reason leaves in the unhealthy ping, which a worker in memory does not send.
    await using h = await testHarness();
    const apiKey = h.apiKey;
    const leak = (raw: unknown): string => {
      const s3 = (raw as { s3Config?: { accessId?: string; accessSecret?: string } }).s3Config;
      return [
        `key ${apiKey}`,
        `model https://alice:${URL_PASSWORD}@models.example/m.gguf`,
        `hub https://hub.example/m.gguf?revision=main&token=${TOKEN}`,
        `header Authorization: Bearer ${TOKEN}`,
        `s3 ${s3?.accessId} ${s3?.accessSecret}`,
      ].join("; ");
    };
    const sink = logSink();
    const worker = await workerFor(
      h,
      defineHandler({
        handler: async function* ({ input, job }) {
          const kind = (input as { kind: string }).kind;
          if (kind === "threw") throw new Error(`download failed: ${leak(job.raw)}`);
          if (kind === "job-error") throw new JobError(`bad request: ${leak(job.raw)}`);
          if (kind === "stream") {
            yield { step: 1 };
            throw new TypeError(`stream broke: ${leak(job.raw)}`);
          }
          throw new WorkerUnfitError("model", `cannot load: ${leak(job.raw)}`);
        },
      }),
      { sink },
    );
    const s3Config = {
      accessId: ACCESS_ID,
      accessSecret: ACCESS_SECRET,
      bucketName: "b",
      endpointUrl: "http://s3.local",
    };
    const ids = ["threw", "job-error", "stream", "unfit"].map((kind) =>
      h.enqueue("local", { input: { kind }, s3Config }),
    );
    for (const id of ids.slice(0, 3)) await h.waitForJob(id);
    await h.waitForJob(ids[3]!);
    expect(await worker.stopped).toEqual({ reason: "unhealthy", exitCode: 1 });
    await waitFor("the unhealthy ping", () =>
      h.requests({ route: "ping" }).some((r) => r.query["status"] === "unhealthy"),
    );

    // What the worker made of it still says what happened.
    const unhealthy = h.requests({ route: "ping" }).find((r) => r.query["status"] === "unhealthy")!;
    expect(unhealthy.query["reason"]).toContain("cannot load: key [redacted]");
    expect(h.job(ids[0]!)?.error).toContain("download failed");
    expect(h.job(ids[2]!)?.stream.length).toBe(1);

    const records: string[] = [];
    for (const id of ids) {
      const { input: _input, ...job } = h.job(id)!;
      records.push(JSON.stringify(job));
      records.push(JSON.stringify(h.timeline(id)));
    }
    records.push(JSON.stringify(h.workers("local")));
    for (const r of h.requests()) {
      // The worker's own key in its Authorization header is how it signs in: everything else counts.
      const { authorization: _auth, ...headers } = r.headers;
      records.push(JSON.stringify({ path: r.path, query: r.query, headers, body: r.body }));
    }
    const all = records.join("\n");
    expect(all).toContain("[redacted]");
    for (const secret of [
      apiKey,
      URL_PASSWORD,
      TOKEN,
      ACCESS_ID,
      ACCESS_SECRET,
      JSON.stringify(ACCESS_SECRET).slice(1, -1),
    ]) {
      expect(all, `"${secret}" left the worker`).not.toContain(secret);
    }
    // And the log, as before.
    for (const secret of [apiKey, URL_PASSWORD, TOKEN, ACCESS_ID, ACCESS_SECRET]) {
      expect(sink.text()).not.toContain(secret);
    }
  });

  it("finds none in the spans a collector receives (telemetry attributes and status messages)", async () => {
    await using h = memoryHarness();
    const receiver = await startReceiver();
    try {
      const worker = await workerFor(
        h,
        defineHandler({
          handler: () => {
            throw new Error(`key ${h.apiKey} https://alice:${URL_PASSWORD}@models.example/?token=${TOKEN}`);
          },
        }),
        {
          env: {
            ...h.workerEnv("local"),
            RUNPOD_ENDPOINT_ID: "local",
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            OTEL_SERVICE_NAME: "secrets-test",
          },
        },
      );
      // The result post is answered 503 once: the retry's event carries an error message too.
      h.injectFault("job-done", { status: 503 }, 1);
      const id = h.enqueue("local", { input: {} });
      await waitFor("the job to fail", () => h.job(id)?.status === "FAILED");
      await worker.close();
      const spans = JSON.stringify(receiver.spans);
      expect(spans).toContain("[redacted]");
      for (const secret of [h.apiKey, URL_PASSWORD, TOKEN]) expect(spans, secret).not.toContain(secret);
    } finally {
      await receiver.close();
    }
  });

  it("finds none in a load-balancing worker's answers: the /runsync 500, the stream's error event, the failed event", async () => {
    const apiKey = "lb-planted-worker-api-key-0001";
    const leak = `key ${apiKey}; model https://alice:${URL_PASSWORD}@h/m; hub https://h/m?token=${TOKEN}`;
    await using lb = await startLbWorker(
      defineHandler({
        handler: async function* ({ input }) {
          if ((input as { stream?: boolean }).stream === true) yield { step: 1 };
          throw new Error(`download failed: ${leak}`);
        },
      }),
      { env: { RUNPOD_AI_API_KEY: apiKey } },
    );
    const failed: string[] = [];
    lb.worker.on("failed", (e) => failed.push(JSON.stringify(e)));
    await waitForAsync("ready", async () => (await call(`${lb.url}/ping`)).status === 200);
    const whole = await post(`${lb.url}/runsync`, { input: {} });
    expect(whole.status).toBe(500);
    expect(JSON.parse(whole.text)).toMatchObject({ status: "FAILED" });
    expect(whole.text).toContain("download failed: key [redacted]");
    const streamed = await post(`${lb.url}/stream`, { input: { stream: true } });
    expect(streamed.text).toContain("event: error");
    expect(streamed.text).toContain("download failed: key [redacted]");
    const all = [whole.text, streamed.text, ...failed].join("\n");
    for (const secret of [apiKey, URL_PASSWORD, TOKEN]) expect(all, secret).not.toContain(secret);
  });

  it("finds none in the Responses API's streamed error event", async () => {
    await using h = memoryHarness();
    const handler = defineOpenAIHandler({
      models: ["echo-1"],
      async *chat() {
        yield "partial";
        throw new Error(`key ${h.apiKey} https://alice:${URL_PASSWORD}@h/m?token=${TOKEN}`);
      },
    });
    const worker = await workerFor(h, handler);
    const raw = await send(h, "/v2/local/openai/v1/responses", {
      method: "POST",
      headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "echo-1", input: "x", stream: true }),
    });
    const text = await raw.text();
    await worker.close();
    expect(text).toContain("event: error");
    expect(text).toContain("key [redacted]");
    for (const secret of [h.apiKey, URL_PASSWORD, TOKEN]) expect(text, secret).not.toContain(secret);
  });
});
