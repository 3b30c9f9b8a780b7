import pino from "pino";
import { describe, expect, it } from "vitest";
import type { JobSnapshot } from "../../src/harness/index.js";
import { defineHandler, startWorker } from "../../src/index.js";
import { inMemoryHarness } from "../support/inject.js";

const MAX_RESULT_BYTES = 10_485_760; // the worker's default maxResultBytes (10 MiB)
const LEAK_BYTES = 8 * 1_048_576;
/** What the leaking handler keeps: it never lets go of these (until the test clears them). */
const leaked: Buffer[] = [];

const handler = defineHandler({
  handler: ({ input }) => {
    const kind = (input as { kind: string }).kind;
    switch (kind) {
      case "leak":
        leaked.push(Buffer.alloc(LEAK_BYTES, leaked.length));
        return { retainedBytes: leaked.reduce((sum, b) => sum + b.length, 0) };
      case "throw-string":
        throw "x";
      case "throw-null":
        throw null;
      case "undefined":
        return undefined;
      case "bigint":
        return { big: 10n };
      case "circular": {
        const node: Record<string, unknown> = { name: "loop" };
        node["self"] = node;
        return node;
      }
      case "huge":
        return "x".repeat(30 * 1_048_576);
      default:
        return { echo: kind };
    }
  },
});

/** The error report the worker posts for a thrown value (docs/protocol.md, "Results"), parsed. */
function report(job: JobSnapshot): Record<string, unknown> {
  expect(job.status).toBe("FAILED");
  return JSON.parse(job.error ?? "") as Record<string, unknown>;
}

describe("reliability: handlers that misbehave", () => {
  it("injects leaking, throwing, undefined, BigInt, circular and 30 MB results: each a clear error or a correct result, and the same worker serves the next job", async () => {
    await using h = inMemoryHarness({ takeTimeoutMs: 1_000 });
    const worker = await startWorker(handler, {
      env: h.workerEnv("local", { podId: "odd" }),
      logger: pino({ level: "silent" }),
      retryBaseMs: 10,
      retryCapMs: 100,
      connect: () => h.connect(),
    });
    try {
      /** Runs one odd job, checks it, then checks an ordinary job right after on the same worker. */
      const run = async (kind: string, check: (job: JobSnapshot) => void) => {
        const job = await h.waitForJob(h.enqueue("local", { input: { kind } }), { timeoutMs: 30_000 });
        check(job);
        expect(job.workerId).toBe("odd");
        const next = await h.waitForJob(h.enqueue("local", { input: { kind: `after-${kind}` } }));
        expect(next.status).toBe("COMPLETED");
        expect(next.output).toEqual({ echo: `after-${kind}` });
        expect(next.workerId).toBe("odd");
      };

      for (let i = 1; i <= 5; i++) {
        await run("leak", (job) => {
          expect(job.status).toBe("COMPLETED");
          expect(job.output).toEqual({ retainedBytes: i * LEAK_BYTES });
        });
      }
      await run("throw-string", (job) => {
        const r = report(job);
        expect(r["error_type"]).toBe("string");
        expect(r["error_message"]).toBe("x");
        expect(r["worker_id"]).toBe("odd");
      });
      await run("throw-null", (job) => {
        const r = report(job);
        expect(r["error_type"]).toBe("null");
        expect(r["error_message"]).toBe("null");
      });
      await run("undefined", (job) => {
        expect(job.status).toBe("COMPLETED");
        expect(job.output).toBeNull();
      });
      await run("bigint", (job) => {
        expect(job.status).toBe("FAILED");
        expect(job.error).toMatch(/^the output cannot be serialised to JSON: .*BigInt/);
      });
      await run("circular", (job) => {
        expect(job.status).toBe("FAILED");
        expect(job.error).toMatch(/^the output cannot be serialised to JSON: .*circular/i);
      });
      await run("huge", (job) => {
        expect(job.status).toBe("FAILED");
        const bytes = 30 * 1_048_576 + 2; // the JSON string's quotes
        expect(job.error).toBe(
          `the output is ${bytes} bytes, over the ${MAX_RESULT_BYTES}-byte limit for a result, and no S3 store is configured to offload it (send s3Config with the job, or set BUCKET_ENDPOINT_URL, BUCKET_ACCESS_KEY_ID and BUCKET_SECRET_ACCESS_KEY on the endpoint)`,
        );
      });
      expect(h.health("local").jobs).toEqual({
        completed: 17,
        failed: 5,
        inProgress: 0,
        inQueue: 0,
        retried: 0,
      });
      expect(h.requests({ route: "job-done" }).every((r) => r.status === 200)).toBe(true);
    } finally {
      leaked.length = 0;
      await worker.close();
    }
  }, 60_000);
});
