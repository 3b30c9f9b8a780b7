import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import runpodSdk from "runpod-sdk";
import { describe, expect, it } from "vitest";
import { createClient, type EndpointClient } from "../../src/client/index.js";
import { type Harness, startHarness } from "../../src/harness/index.js";
import type { HandlerDefinition } from "../../src/index.js";
import { defineHandler, startWorker, type Worker } from "../../src/index.js";
import { createReassembler } from "../../src/stream/index.js";
import { createHarness } from "../../src/testing/index.js";
import { plainText } from "./thread-text-handler.js";

const threadTextHandler = fileURLToPath(new URL("./thread-text-handler.ts", import.meta.url));

// Streaming end to end: a real runlet worker against runlet's harness over loopback, read by
// runlet's client (and once by the official JS client).

const quiet = () =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });

async function setUp(
  definition: HandlerDefinition,
  options: { handlerModule?: string } = {},
): Promise<{
  h: Harness;
  worker: Worker;
  ep: EndpointClient;
  [Symbol.asyncDispose](): Promise<void>;
}> {
  const h = await startHarness({ takeTimeoutMs: 300 });
  const worker = await startWorker(definition, {
    env: { ...h.workerEnv("local"), RUNPOD_ENDPOINT_ID: "local" },
    logDestination: quiet(),
    shutdownGraceMs: 2_000,
    flushTimeoutMs: 2_000,
    ...options,
  });
  const ep = createClient({ apiKey: h.apiKey, baseUrl: h.url }).endpoint("local");
  return {
    h,
    worker,
    ep,
    async [Symbol.asyncDispose]() {
      await worker.close();
      await h.close();
    },
  };
}

async function readAll(ep: EndpointClient, id: string): Promise<{ values: unknown[]; error: unknown }> {
  const values: unknown[] = [];
  try {
    for await (const value of ep.stream(id)) values.push(value);
    return { values, error: undefined };
  } catch (error) {
    return { values, error };
  }
}

describe("streaming end to end", () => {
  it("delivers 500 small tokens complete and in order", async () => {
    // Order and completeness need hundreds, not the bench's 100 000 (npm run bench, "stream").
    await using s = await setUp(
      defineHandler({
        async *handler() {
          for (let i = 0; i < 500; i++) yield `tok${i} `;
        },
      }),
    );
    const { id } = await s.ep.run({ input: {} });
    const { values, error } = await readAll(s.ep, id);
    expect(error).toBeUndefined();
    expect(values).toEqual(Array.from({ length: 500 }, (_, i) => `tok${i} `));
    expect(await s.ep.status(id)).toMatchObject({ status: "COMPLETED", output: [] });
  });

  it("merges tokens with streamCoalesceMs without changing their concatenation", async () => {
    await using s = await setUp(
      defineHandler({
        streamCoalesceMs: 20,
        async *handler() {
          for (let i = 0; i < 2_000; i++) yield `t${i},`;
        },
      }),
    );
    const { id } = await s.ep.run({ input: {} });
    const { values, error } = await readAll(s.ep, id);
    expect(error).toBeUndefined();
    expect(values.join("")).toBe(Array.from({ length: 2_000 }, (_, i) => `t${i},`).join(""));
    expect(values.length).toBeLessThan(2_000);
  }, 60_000);

  it("delivers a 4 MB string and a 3 MB buffer intact, in ≤ 1 MiB chunks", async () => {
    // Several chunks of each are what splitting needs; the bench streams 100 MB (npm run bench, "stream").
    const unit = 'runlet é😀 "quoted" \\ \n'; // ASCII, 2-byte, astral, escapes
    const text = unit.repeat(Math.ceil(4_000_000 / Buffer.byteLength(unit)));
    const bytes = Buffer.alloc(3_000_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31 + (i >> 8)) & 0xff;
    await using s = await setUp(
      defineHandler({
        async *handler() {
          yield text;
          yield bytes;
        },
      }),
    );
    const { id } = await s.ep.run({ input: {} });
    const { values, error } = await readAll(s.ep, id);
    expect(error).toBeUndefined();
    expect(values).toHaveLength(2);
    expect(values[0] === text).toBe(true);
    expect(Buffer.isBuffer(values[1]) && bytes.equals(values[1])).toBe(true);
    const posted = s.h.job(id)?.stream ?? [];
    expect(posted.length).toBeGreaterThan(7);
    for (const chunk of posted)
      expect(Buffer.byteLength(JSON.stringify(chunk))).toBeLessThanOrEqual(1_048_576);
  }, 120_000);

  it("delivers a 5 MB plain ASCII string intact, posted as bytes, in-process and from an isolation thread", async () => {
    // Plain text takes the byte path (each slice written once into the body posted; from a thread
    // the body's memory is moved to the main thread, not copied).
    const size = 5_000_000;
    const text = plainText(size);
    for (const handlerModule of [undefined, threadTextHandler]) {
      const definition =
        handlerModule === undefined
          ? defineHandler({
              async *handler() {
                yield text;
              },
            })
          : ((await import(handlerModule)).default as HandlerDefinition);
      await using s = await setUp(definition, handlerModule === undefined ? {} : { handlerModule });
      const { id } = await s.ep.run({ input: { bytes: size } });
      const { values, error } = await readAll(s.ep, id);
      expect(error).toBeUndefined();
      expect(values).toHaveLength(1);
      expect(values[0] === text).toBe(true);
      const posted = s.h.job(id)?.stream ?? [];
      expect(posted.length).toBe(5);
      for (const chunk of posted) {
        expect(Buffer.byteLength(JSON.stringify(chunk))).toBeLessThanOrEqual(1_048_576);
        expect(chunk.metrics).toMatchObject({ encoding: "string", parts: 5, bytes: size + 2 });
      }
    }
  }, 60_000);

  it("delivers the 100 items yielded before an error, then the failure", async () => {
    await using s = await setUp(
      defineHandler({
        async *handler() {
          for (let i = 0; i < 100; i++) yield { i };
          throw new Error("boom after 100");
        },
      }),
    );
    const { id } = await s.ep.run({ input: {} });
    const { values, error } = await readAll(s.ep, id);
    expect(values).toEqual(Array.from({ length: 100 }, (_, i) => ({ i })));
    expect(error).toMatchObject({
      code: "RUNLET_CLIENT_JOB_FAILED",
      message: `job ${id} ended FAILED: boom after 100`,
      details: { id, status: "FAILED" },
    });
  }, 60_000);

  it("ends the generator through its signal when the job is cancelled mid-stream, posting nothing more", async () => {
    let finallyRan = false;
    await using s = await setUp(
      defineHandler({
        async *handler({ signal }) {
          try {
            for (let i = 0; ; i++) {
              if (signal.aborted) return;
              yield i;
              await new Promise((r) => setTimeout(r, 10));
            }
          } finally {
            finallyRan = true;
          }
        },
      }),
    );
    const { id } = await s.ep.run({ input: {} });
    const values: unknown[] = [];
    const error = await (async () => {
      for await (const value of s.ep.stream(id)) {
        values.push(value);
        if (values.length === 5) await s.ep.cancel(id);
      }
    })().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "RUNLET_CLIENT_JOB_FAILED", details: { status: "CANCELLED" } });
    expect(values.slice(0, 5)).toEqual([0, 1, 2, 3, 4]);
    expect(values).toEqual(Array.from({ length: values.length }, (_, i) => i));
    // The worker learns of the cancel from job-stop; its generator ends (signal, or return()).
    await expect.poll(() => finallyRan, { timeout: 10_000 }).toBe(true);
    // Counted as the worker's posts, not the job's stream: the harness may refuse a post to a
    // cancelled job, so the stored stream could not show one. Closing the worker flushes every
    // post it still had queued or in flight, so a post made after the stop would be counted by
    // the time close() returns: the close is what proves none came, not a pause.
    const posts = () => s.h.requests({ route: "job-stream" }).filter((r) => r.path.endsWith(`/${id}`)).length;
    const postedAtStop = posts();
    await s.worker.close();
    expect(posts()).toBe(postedAtStop);
    expect(s.h.job(id)?.status).toBe("CANCELLED");
  }, 60_000);

  it("is readable by the official JS client's stream(), with createReassembler joining split items", async () => {
    const big = "official client ✓ ".repeat(150_000); // ~2.9 MB: split into 3 chunks
    await using s = await setUp(
      defineHandler({
        async *handler() {
          yield "a";
          yield big;
          yield { done: true };
        },
      }),
    );
    const official = runpodSdk(s.h.apiKey, { baseUrl: `${s.h.url}/v2` }).endpoint("local");
    if (official === null) throw new Error("runpod-sdk returned no endpoint");
    const { id } = await official.run({ input: {} });
    const reassembler = createReassembler();
    const values: unknown[] = [];
    let chunks = 0;
    for await (const chunk of official.stream(id)) {
      chunks += 1;
      values.push(...reassembler.push(chunk));
    }
    reassembler.finish();
    expect(chunks).toBeGreaterThanOrEqual(5);
    expect(values).toHaveLength(3);
    expect(values[0]).toBe("a");
    expect(values[1] === big).toBe(true);
    expect(values[2]).toEqual({ done: true });
  }, 60_000);

  it("streams through runlet/testing's createHarness client in a few lines", async () => {
    const page = { rows: Array.from({ length: 40_000 }, (_, i) => ({ i, s: `"row" ${i}` })) }; // ~1.2 MB of JSON
    await using h = await createHarness({
      handler: defineHandler({
        async *handler() {
          yield page;
          yield "end";
        },
      }),
      takeTimeoutMs: 300,
    });
    const { id } = await h.endpoint.run({ input: {} });
    const values: unknown[] = [];
    for await (const value of h.endpoint.stream(id)) values.push(value);
    expect(values).toEqual([page, "end"]);
    const encodings = (h.harness.job(id)?.stream ?? []).map((chunk) => chunk.metrics?.["encoding"]);
    expect(encodings).toEqual(["json-text", "json-text", "json"]);
  }, 60_000);
});
