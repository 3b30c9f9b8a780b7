import { describe, expect, it } from "vitest";
import { type Harness, ManualClock, startHarness } from "../../src/harness/index.js";
import { defineHandler } from "../../src/index.js";
import { createHarness } from "../../src/testing/index.js";
import { postChunk, postDone, takeJob } from "../support/harness-calls.js";
import { waitFor } from "../support/workers.js";

/** Starts a streamed chat request on endpoint `local`; the answer is read by the caller. */
function streamRequest(h: { url: string; apiKey: string }): Promise<Response> {
  return fetch(`${h.url}/v2/local/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }], stream: true }),
  });
}

/** The `data:` payloads of a whole SSE body, failing on anything that is not a `data:` event. */
function events(text: string): unknown[] {
  expect(text.endsWith("\n\n")).toBe(true);
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((event) => {
      expect(event.startsWith("data: "), event.slice(0, 60)).toBe(true);
      const data = event.slice("data: ".length);
      return data === "[DONE]" ? data : (JSON.parse(data) as unknown);
    });
}

const event = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;

describe("the OpenAI relay's stream", () => {
  it("writes an object over 1 MiB (JSON-text slices) as one event and a bytes item as its bytes", async () => {
    const big = { choices: [{ index: 0, delta: { content: "A" } }], pad: "é".repeat(700_000) };
    const handler = defineHandler({
      async *handler() {
        yield big; // over 1 MiB of JSON: the worker posts slices of its JSON text
        yield Buffer.from(event({ bytes: "ünï" })); // bytes: the worker posts base64
        yield event({ text: "z".repeat(1_100_000) }); // a string over 1 MiB: string slices
        yield { small: true };
      },
    });
    await using h = await createHarness({ handler });
    const res = await streamRequest(h);
    expect(res.status).toBe(200);
    const text = await res.text();
    const job = h.harness.job(res.headers.get("x-request-id")!)!;
    const encodings = job.stream.map((c) => c.metrics?.["encoding"]);
    expect(encodings).toContain("json-text");
    expect(encodings).toContain("base64");
    expect(encodings).toContain("string");
    expect(events(text)).toEqual([
      big,
      { bytes: "ünï" },
      { text: "z".repeat(1_100_000) },
      { small: true },
      "[DONE]",
    ]);
  });

  it("ends the stream with an error event when the worker's split chunks do not reassemble", async () => {
    await using h = await startHarness({});
    const res = streamRequest(h);
    const job = (await takeJob(h))!;
    const part = (p: number) => ({
      output: `"slice ${p}"`,
      metrics: { streamIndex: 0, part: p, parts: 3, encoding: "json-text", bytes: 30 },
    });
    expect(await postChunk(h, job.id, part(0))).toBe(200);
    expect(await postChunk(h, job.id, part(2))).toBe(200); // part 1 skipped
    const answer = await res;
    expect(answer.status).toBe(500);
    const body = (await answer.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("stream_invalid");
    expect(body.error.message).toContain("expected part 1, got part 2");
    expect(h.job(job.id)?.status).toBe("CANCELLED");
  });
});

describe("the OpenAI relay when the job's worker lapses and the job is requeued", () => {
  const HEARTBEAT_TIMEOUT_MS = 1_000;

  async function lapsedAfter(h: Harness, clock: ManualClock, jobId: string): Promise<void> {
    clock.advance(HEARTBEAT_TIMEOUT_MS);
    await waitFor("the requeue", () => h.job(jobId)?.status === "IN_QUEUE");
  }

  it("does not repeat tokens: a stream that has sent items ends with job_restarted and the job is cancelled", async () => {
    const clock = new ManualClock();
    await using h = await startHarness({ clock, heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
    const res = await streamRequestStarted(h, async (jobId) => {
      expect(await postChunk(h, jobId, { output: event({ t: "Hello" }) }, "a")).toBe(200);
    });
    const jobId = res.headers.get("x-request-id")!;
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toBe(event({ t: "Hello" }));
    await lapsedAfter(h, clock, jobId);
    expect(h.job(jobId)?.stream).toEqual([]); // the first attempt's chunks are gone with it
    expect((await takeJob(h, "local", "b"))?.id).toBe(jobId);
    expect(await postChunk(h, jobId, { output: event({ t: "Hello" }) }, "b")).toBe(200);
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += new TextDecoder().decode(r.value);
    expect(events(first + rest)).toEqual([
      { t: "Hello" },
      {
        error: {
          message:
            "the job's worker was lost mid-stream and the job went back to the queue; what was sent cannot be taken back, so this stream ends here",
          type: "server_error",
          param: null,
          code: "job_restarted",
        },
      },
    ]);
    expect(h.job(jobId)?.status).toBe("CANCELLED");
  });

  it("starts over with the new attempt when nothing had reached the client yet", async () => {
    const clock = new ManualClock();
    await using h = await startHarness({ clock, heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
    const pending = streamRequest(h);
    const job = (await takeJob(h, "local", "a"))!;
    // The first part of a split item: nothing can be written until the rest arrives.
    const head = {
      output: '{"t":',
      metrics: { streamIndex: 0, part: 0, parts: 2, encoding: "json-text", bytes: 9 },
    };
    expect(await postChunk(h, job.id, head, "a")).toBe(200);
    await lapsedAfter(h, clock, job.id);
    expect((await takeJob(h, "local", "b"))?.id).toBe(job.id);
    expect(await postChunk(h, job.id, { output: { t: "Hi" } }, "b")).toBe(200);
    expect(await postDone(h, job.id, { output: [] }, { workerId: "b", isStream: true })).toBe(200);
    const res = await pending;
    expect(res.status).toBe(200);
    expect(events(await res.text())).toEqual([{ t: "Hi" }, "[DONE]"]);
  });

  /** Opens a streamed request, lets worker `a` take its job and run `act`, and returns the started answer. */
  async function streamRequestStarted(h: Harness, act: (jobId: string) => Promise<void>): Promise<Response> {
    const pending = streamRequest(h);
    const job = (await takeJob(h, "local", "a"))!;
    await act(job.id);
    return pending;
  }
});
