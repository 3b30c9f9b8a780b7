import { z } from "zod";
import type { testHarness } from "./helpers.js";

/** Helpers of the batch tests (batch.test.ts, batch-runaway.test.ts). */

/** Lets pending promise callbacks and I/O callbacks run. */
export const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A promise with its resolver, for a handler the test lets go. */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** The batch query of a job's final job-done post. */
export function batchOf(h: Awaited<ReturnType<typeof testHarness>>, id: string) {
  const { query } = h.requests({ route: "job-done" }).find((r) => r.path.endsWith(`/${id}`))!;
  return { id: query["batch_id"], size: query["batch_size"], waitMs: query["batch_wait_ms"] };
}

export const numbers = z.object({ n: z.number() });
