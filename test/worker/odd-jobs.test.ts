import { describe, expect, it } from "vitest";
import { defineHandler, type HandlerDefinition } from "../../src/index.js";
import { startWorker } from "../../src/worker/index.js";
import { MAX_PLATFORM_CONNECTIONS } from "../../src/worker/platform/platform-http.js";
import { logSink, waitFor } from "../support/workers.js";
import { startOddPlatform } from "./odd-platform.js";

/**
 * Issue 21, items 7–9: job ids a URL or a header cannot carry, a malformed copy of a running job,
 * and an over-full take answer, handed out by a platform stand-in (odd-platform.ts). Each test
 * failed on the old code (said per test).
 */

const job = (id: string, input: unknown = {}) => ({ id, input });
const echo = defineHandler({ concurrency: 2, handler: ({ job: j }) => ({ id: j.id }) });

async function workerOn(
  platform: Awaited<ReturnType<typeof startOddPlatform>>,
  definition: HandlerDefinition = echo as HandlerDefinition,
) {
  const sink = logSink();
  const worker = await startWorker(definition, {
    env: platform.env,
    logDestination: sink.stream,
    shutdownGraceMs: 2_000,
    flushTimeoutMs: 2_000,
    retryBaseMs: 20,
    retryCapMs: 200,
  });
  return { worker, sink };
}

describe("odd job ids and take answers", () => {
  it("refuses a job named `.` or `..` and posts nothing for it (old code: posted to /job-done/pod/)", async () => {
    await using platform = await startOddPlatform([
      JSON.stringify([job(".."), job(".")]),
      JSON.stringify(job("after")),
    ]);
    const { worker, sink } = await workerOn(platform);
    try {
      await waitFor("the next job's result", () => platform.posts.some((p) => p.path.endsWith("/after")));
      expect(platform.posts.map((p) => p.path)).toEqual(["/v2/odd/job-done/pod/after"]);
      const refused = sink.lines
        .filter((l) => l["code"] === "RUNLET_PROTOCOL_BAD_JOB")
        .map((l) => l["jobId"]);
      expect(refused).toEqual(["..", "."]);
    } finally {
      await worker.close();
    }
  });

  it("delivers the results of ids a header cannot carry, and goes on taking (old code: retried for ever, slot busy)", async () => {
    await using platform = await startOddPlatform([
      JSON.stringify(job("line\nbreak")),
      JSON.stringify(job("日本")),
      JSON.stringify(job("after")),
    ]);
    const { worker } = await workerOn(platform, defineHandler({ handler: ({ job: j }) => ({ id: j.id }) }));
    try {
      await waitFor("the third job's result", () => platform.posts.some((p) => p.path.endsWith("/after")));
      const byPath = new Map(platform.posts.map((p) => [p.path, p]));
      const line = byPath.get(`/v2/odd/job-done/pod/${encodeURIComponent("line\nbreak")}`);
      const kanji = byPath.get(`/v2/odd/job-done/pod/${encodeURIComponent("日本")}`);
      expect(JSON.parse(line!.body)).toMatchObject({ output: { id: "line\nbreak" } });
      expect(line!.headers["x-request-id"]).toBe(encodeURIComponent("line\nbreak"));
      expect(JSON.parse(kanji!.body)).toMatchObject({ output: { id: "日本" } });
      expect(kanji!.headers["x-request-id"]).toBe(encodeURIComponent("日本"));
      expect(byPath.get("/v2/odd/job-done/pod/after")!.headers["x-request-id"]).toBe("after");
    } finally {
      await worker.close();
    }
  });

  it("ignores a malformed copy of a running job (old code: posted it failed, then its output)", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    await using platform = await startOddPlatform([JSON.stringify(job("A")), JSON.stringify({ id: "A" })]);
    const { worker, sink } = await workerOn(
      platform,
      defineHandler({
        concurrency: 2,
        handler: async () => {
          await gate;
          return "real output";
        },
      }),
    );
    try {
      // A third take arrives once the worker has handled the answer with the malformed copy.
      await waitFor("the take after the malformed copy", () => platform.takeRequests >= 3);
      expect(sink.lines.some((l) => String(l["message"]).includes("malformed copy"))).toBe(true);
      release();
      await waitFor("A's result", () => platform.posts.length > 0);
      await worker.close();
      expect(platform.posts.map((p) => [p.path, JSON.parse(p.body)])).toEqual([
        ["/v2/odd/job-done/pod/A", { output: "real output" }],
      ]);
    } finally {
      release();
      await worker.close();
    }
  });

  it("bounds its connections when a take for one job is answered with 600 (old code: a socket per job)", async () => {
    const flood = Array.from({ length: 600 }, (_, i) => job(`flood-${i}`));
    await using platform = await startOddPlatform([JSON.stringify(flood)]);
    const { worker } = await workerOn(platform, defineHandler({ handler: () => "ok" }));
    try {
      await waitFor("every job's report", () => platform.posts.length === 600, 30_000);
      // The run job's result and 599 failures of jobs it did not ask for, each posted once.
      expect(new Set(platform.posts.map((p) => p.path)).size).toBe(600);
      // The take and the job-stop poll hold one each besides the posts.
      expect(platform.maxOpen).toBeLessThanOrEqual(MAX_PLATFORM_CONNECTIONS + 2);
    } finally {
      await worker.close();
    }
  }, 40_000);

  it("does not read a take answer past its limit (old code: read and ran it)", async () => {
    const huge = JSON.stringify(job("huge", { pad: "x".repeat(21 * 1024 * 1024) }));
    await using platform = await startOddPlatform([huge, JSON.stringify(job("after"))]);
    const { worker, sink } = await workerOn(platform, defineHandler({ handler: () => "ok" }));
    try {
      await waitFor("the next job's result", () => platform.posts.some((p) => p.path.endsWith("/after")));
      expect(platform.posts.map((p) => p.path)).toEqual(["/v2/odd/job-done/pod/after"]);
      expect(sink.lines.some((l) => String(l["reason"] ?? "").includes("not read further"))).toBe(true);
    } finally {
      await worker.close();
    }
  });
});
