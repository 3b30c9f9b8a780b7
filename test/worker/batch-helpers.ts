import { z } from "zod";
import type { testHarness } from "../support/workers.js";

/** Helpers of the batch tests (batch.test.ts, batch-runaway.unit.test.ts). */

/** The batch query of a job's final job-done post. */
export function batchOf(h: Awaited<ReturnType<typeof testHarness>>, id: string) {
  const { query } = h.requests({ route: "job-done" }).find((r) => r.path.endsWith(`/${id}`))!;
  return { id: query["batch_id"], size: query["batch_size"], waitMs: query["batch_wait_ms"] };
}

export const numbers = z.object({ n: z.number() });
